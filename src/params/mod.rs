//! `SamplingParams`: the contract every other part of samplab speaks.
//!
//! Names, meanings and defaults follow the engines (vLLM's where vLLM has the parameter) so that
//! export is lossless. Values are never clamped: a bad value is an error that names the field,
//! the value and the valid range. YAML, JSON, `--set key=value` and values typed in the TUI all
//! go through [`SamplingParams::set`], so every input path reports errors the same way. Each
//! parameter is one row of [`table`].

mod engine;
mod field;
mod logit_bias;
mod reporting;
mod structured;
pub mod sweep;
mod table;
mod token_texts;

pub use engine::{Engine, Engines, Stage, Stages};
pub use field::{Bounds, FieldSpec, Knob, Names, OffBelowOne};
pub use logit_bias::{BIAS_LIMIT, LogitBias};
pub use reporting::{LogprobsMode, RepetitionDetection};
pub use structured::{LlamaCppConstraint, Schema, StructuredOutputs, is_gbnf, quoted};
pub use table::{Field, SamplingParams};
pub use token_texts::{TokenText, TokenTexts};

use serde::{Deserialize, Deserializer, de};
use serde_yaml_ng::Value;
use std::borrow::Cow;
use std::fmt;

/// Temperatures below this are greedy decoding (vLLM's `_SAMPLING_EPS`).
pub const GREEDY_TEMPERATURE: f32 = 1e-5;
/// The most parallel samples a run may ask for.
pub const MAX_SAMPLES: u32 = 64;
/// The most alternatives reported per token (vLLM's default `max_logprobs` is 20).
pub const MAX_LOGPROBS: u32 = 20;
/// The most tokens `watch` follows (validate's message says 16): each costs a lookup per step
/// and a line per view.
pub const MAX_WATCHED: usize = 16;

/// What is wrong with a parameter, said so that the user knows what would be right.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParamError {
    #[error(
        "unknown parameter `{key}`{hint}; valid parameters are: {}",
        field_names()
    )]
    UnknownKey { key: String, hint: String },
    #[error("`{field}` has the wrong type: {message}")]
    WrongType {
        field: &'static str,
        message: String,
    },
    #[error("`{field}` = {value} is invalid: {valid}")]
    OutOfRange {
        field: &'static str,
        value: String,
        valid: Cow<'static, str>,
    },
    /// A whole number its field's type cannot hold; `range` is what it can, in words.
    #[error("`{field}` = {value} is out of range: {range}")]
    BeyondType {
        field: &'static str,
        value: String,
        range: String,
    },
    /// A value its type's own reading refused, with the type's reason (a schema file that is
    /// not there).
    #[error("`{field}` is invalid: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    #[error("parameters must be a mapping of names to values (e.g. `temperature: 0.7`), got {0}")]
    NotAMapping(String),
    #[error("not valid YAML/JSON: {0}")]
    Syntax(String),
    #[error("`{0}` expects key=value, e.g. temperature=0.7")]
    NotAnAssignment(String),
    #[error(
        "`{field}` names token {id}, but the model's vocabulary has {vocab_size} tokens (ids 0..{vocab_size})"
    )]
    TokenOutsideVocabulary {
        field: &'static str,
        id: u32,
        vocab_size: usize,
    },
    #[error(
        "`{field}` is not a {engine} parameter (only {engines}): set `engine` to one of them, or leave `{field}` at its default"
    )]
    NotInEngine {
        field: &'static str,
        engine: &'static str,
        engines: String,
    },
}

impl SamplingParams {
    /// Parses YAML or JSON (JSON is YAML), with every field checked.
    pub fn from_yaml(text: &str) -> Result<Self, ParamError> {
        let value = crate::yaml_guard::parse(text)
            .map_err(|e| ParamError::Syntax(too_large(e.to_string())))?;
        Self::from_value(value)
    }

    /// Reads a parsed YAML mapping (a preset, or the parameters inside a session file), with
    /// every field checked as [`SamplingParams::from_yaml`] checks it.
    pub fn from_value(value: Value) -> Result<Self, ParamError> {
        let mut params = Self::default();
        match value {
            Value::Null => {}
            Value::Mapping(map) => {
                for (key, value) in map {
                    let key = match key {
                        Value::String(key) => key,
                        other => {
                            return Err(ParamError::UnknownKey {
                                key: describe(&other),
                                hint: String::new(),
                            });
                        }
                    };
                    params.set(&key, value)?;
                }
            }
            other => return Err(ParamError::NotAMapping(describe(&other))),
        }
        params.validate()?;
        Ok(params)
    }

    /// YAML with every field, for responses and debugging.
    pub fn to_yaml(&self) -> String {
        serde_yaml_ng::to_string(self).expect("SamplingParams always serialises")
    }

    /// YAML with only the fields that differ from the defaults: what a preset file stores.
    pub fn to_yaml_non_default(&self) -> String {
        serde_yaml_ng::to_string(&self.non_default_mapping())
            .expect("a YAML mapping always serialises")
    }

    /// The fields that differ from the defaults, as the YAML mapping a preset holds.
    pub fn non_default_mapping(&self) -> serde_yaml_ng::Mapping {
        // Compared as parsed YAML text, not as serde values: f32 fields widened to f64 would
        // print as 0.699999988079071 instead of the 0.7 the user typed.
        let as_mapping = |params: &Self| match serde_yaml_ng::from_str(&params.to_yaml()) {
            Ok(Value::Mapping(map)) => map,
            _ => unreachable!("SamplingParams serialises to a YAML mapping"),
        };
        let defaults = as_mapping(&Self::default());
        let mut map = as_mapping(self);
        map.retain(|key, value| defaults.get(key) != Some(value));
        map
    }

    /// Applies `key=value`, the value written in YAML (`temperature=0.7`, `stop=["\n\n"]`).
    pub fn set_assignment(&mut self, assignment: &str) -> Result<(), ParamError> {
        let (key, raw) = assignment
            .split_once('=')
            .ok_or_else(|| ParamError::NotAnAssignment(assignment.to_owned()))?;
        self.set_text(key.trim(), raw)
    }

    /// Sets one field from text as a user types it; the text is read as a YAML value.
    /// The params are unchanged unless the new value is valid.
    pub fn set_text(&mut self, key: &str, raw: &str) -> Result<(), ParamError> {
        let field = field_named(key)?;
        let value = if raw.trim().is_empty() {
            Value::Null
        } else if field == Field::Grammar && !raw.trim_start().starts_with(['"', '\'', '|', '>']) {
            // GBNF as written: YAML would fold its lines into one, read a leading `#` comment as
            // null and refuse a `": "` inside a literal. A quoted or block string is YAML's.
            Value::String(raw.to_owned())
        } else {
            // A stop string may be bare text (`The End`); text that opens a YAML list, mapping or
            // quoted string and does not parse is a mistake, not a stop string.
            let opens_yaml = raw.trim_start().starts_with(['[', '{', '"', '\'']);
            match crate::yaml_guard::parse(raw) {
                Ok(value) => value,
                Err(_) if field.spec().knob == Knob::TokenList && !opens_yaml => {
                    Value::String(raw.to_owned())
                }
                Err(e) => {
                    return Err(ParamError::WrongType {
                        field: field.name(),
                        message: in_words(&e.to_string()),
                    });
                }
            }
        };
        let mut next = self.clone();
        next.set_field(field, value)?;
        next.validate()?;
        *self = next;
        Ok(())
    }

    /// Sets the field named `key` from a parsed value, checking its type (not its range: see
    /// `validate`).
    pub fn set(&mut self, key: &str, value: Value) -> Result<(), ParamError> {
        self.set_field(field_named(key)?, value)
    }

    /// Checks every field against its row of the table, then what rows cannot say alone.
    pub fn validate(&self) -> Result<(), ParamError> {
        fn bad(
            field: Field,
            value: impl fmt::Display,
            valid: impl Into<Cow<'static, str>>,
        ) -> ParamError {
            ParamError::OutOfRange {
                field: field.name(),
                value: value.to_string(),
                valid: valid.into(),
            }
        }
        let defaults = Self::default();
        for &field in Field::ALL {
            let spec = field.spec();
            let value = self.get(field);
            if let Some(bounds) = spec.bounds
                && let Some(x) = number(&value)
                && !bounds.contains(x)
            {
                return Err(bad(field, x, spec.valid()));
            }
            if self.is_outside_engine(field, &defaults) {
                return Err(ParamError::NotInEngine {
                    field: field.name(),
                    engine: self.engine.title(),
                    engines: spec.engines.having_it(),
                });
            }
        }
        if let Some(stop) = &self.stop
            && stop.strings().any(str::is_empty)
        {
            return Err(bad(
                Field::Stop,
                "\"\"",
                "stop strings must not be empty (an empty string would stop at once)",
            ));
        }
        if let Some(watch) = &self.watch {
            if watch.strings().any(str::is_empty) {
                return Err(bad(
                    Field::Watch,
                    "\"\"",
                    "watched strings must not be empty (give the text of a token, or its #id)",
                ));
            }
            if watch.0.len() > MAX_WATCHED {
                return Err(bad(
                    Field::Watch,
                    format!("{} tokens", watch.0.len()),
                    "watch at most 16 tokens",
                ));
            }
        }
        if let Some(max) = self.max_tokens
            && self.min_tokens > max
        {
            return Err(bad(
                Field::MinTokens,
                self.min_tokens,
                "must be <= max_tokens",
            ));
        }
        if let Some((id, bias)) = self
            .logit_bias
            .iter()
            .flat_map(|b| &b.0)
            .find(|(_, b)| !b.is_finite())
        {
            return Err(bad(
                Field::LogitBias,
                format!("{{{id}: {bias}}}"),
                "biases must be finite numbers (they are clamped to [-100, 100])",
            ));
        }
        if self.bad_words.iter().flatten().any(|w| w.trim().is_empty()) {
            return Err(bad(Field::BadWords, "\"\"", "bad words must not be empty"));
        }
        if self.allowed_token_ids.as_ref().is_some_and(Vec::is_empty) {
            return Err(bad(
                Field::AllowedTokenIds,
                "[]",
                "must list at least one token id, or be null to allow all",
            ));
        }
        let constraints = [
            (Field::StructuredOutputs, self.structured_outputs.is_some()),
            (Field::Grammar, self.grammar.is_some()),
            (Field::JsonSchema, self.json_schema.is_some()),
        ];
        let mut set = constraints
            .iter()
            .filter(|(_, on)| *on)
            .map(|(f, _)| f.name());
        if let (Some(first), Some(second)) = (set.next(), set.next()) {
            return Err(ParamError::OutOfRange {
                field: Field::StructuredOutputs.name(),
                value: format!("`{first}` and `{second}` both set"),
                valid: "one constraint per run: set one of structured_outputs, grammar and \
                        json_schema, and the others to null"
                    .into(),
            });
        }
        if let Some(grammar) = &self.grammar
            && !is_gbnf(grammar)
        {
            return Err(bad(
                Field::Grammar,
                "a grammar without `::=`",
                "llama.cpp's grammar is GBNF (`root ::= …`); a Lark grammar goes in \
                 structured_outputs: {grammar: …}",
            ));
        }
        if let Some(StructuredOutputs::Choice(choice)) = &self.structured_outputs
            && (choice.is_empty() || choice.iter().any(String::is_empty))
        {
            return Err(bad(
                Field::StructuredOutputs,
                "{choice: …}",
                "choice lists at least one string, and no empty one",
            ));
        }
        if let Some(refusal) = self.repetition_detection.and_then(|r| r.refusal()) {
            let shown = serde_json::to_string(&self.repetition_detection).unwrap_or_default();
            return Err(bad(Field::RepetitionDetection, shown, refusal));
        }
        if self.dry_sequence_breakers.iter().any(String::is_empty) {
            return Err(bad(
                Field::DrySequenceBreakers,
                "\"\"",
                "breakers must not be empty strings",
            ));
        }
        Ok(())
    }

    /// Checks the token ids the params name against a model's vocabulary of `vocab_size`.
    pub fn check_token_ids(&self, vocab_size: usize) -> Result<(), ParamError> {
        let named = [
            (
                Field::LogitBias,
                self.logit_bias
                    .iter()
                    .flat_map(|b| b.0.keys().copied())
                    .max(),
            ),
            (
                Field::AllowedTokenIds,
                self.allowed_token_ids.iter().flatten().copied().max(),
            ),
            (
                Field::Stop,
                self.stop.iter().flat_map(TokenTexts::token_ids).max(),
            ),
            (
                Field::Watch,
                self.watch.iter().flat_map(TokenTexts::token_ids).max(),
            ),
        ];
        for (field, largest) in named {
            if let Some(id) = largest.filter(|&id| id as usize >= vocab_size) {
                return Err(ParamError::TokenOutsideVocabulary {
                    field: field.name(),
                    id,
                    vocab_size,
                });
            }
        }
        Ok(())
    }

    /// The run's constraint with the field that holds it (`validate` allows one).
    pub fn constraint(&self) -> Option<(Field, StructuredOutputs)> {
        (self.structured_outputs.clone())
            .map(|spec| (Field::StructuredOutputs, spec))
            .or_else(|| {
                let grammar = self.grammar.clone()?;
                Some((Field::Grammar, StructuredOutputs::Grammar(grammar)))
            })
            .or_else(|| {
                let schema = self.json_schema.clone()?;
                Some((Field::JsonSchema, StructuredOutputs::Json(schema)))
            })
    }

    /// True when every sample takes the argmax.
    pub fn is_greedy(&self) -> bool {
        self.temperature < GREEDY_TEMPERATURE
    }

    /// `top_k` as a count, `None` when it keeps everything (`-1` or `0`).
    pub fn top_k_limit(&self) -> Option<usize> {
        usize::try_from(self.top_k).ok().filter(|&k| k > 0)
    }

    /// Whether llama.cpp's adaptive-p draws the token: its target is set (negative is off) and
    /// mirostat, which replaces the whole chain, is not.
    pub fn adaptive_p(&self) -> bool {
        self.engine == Engine::LlamaCpp && self.adaptive_target >= 0.0 && self.mirostat == 0
    }

    /// llama.cpp's `--samplers` for these params: `samplers`, or its default order, with
    /// `adaptive_p` last exactly when adaptive-p is on. llama.cpp runs adaptive-p only when the
    /// list names it, and always last, in place of the final draw; samplab turns it on by its
    /// target, so the list that asks llama.cpp for the same chain names it then.
    pub fn llama_cpp_order(&self) -> Vec<Stage> {
        let order = self
            .samplers
            .as_deref()
            .unwrap_or(&Stage::LLAMA_CPP_DEFAULT);
        let mut order: Vec<Stage> = order
            .iter()
            .copied()
            .filter(|&stage| stage != Stage::AdaptiveP)
            .collect();
        if self.adaptive_p() {
            order.push(Stage::AdaptiveP);
        }
        order
    }

    /// The same settings in their one canonical spelling (`top_k: 0` as -1, any negative
    /// adaptive_target as -1, an empty stop list as none), so that equal behaviour compares
    /// equal and a saved file lists only real changes.
    pub fn normalized(&self) -> Self {
        let mut params = self.clone();
        if params.top_k_limit().is_none() {
            params.top_k = -1;
        }
        if params.adaptive_target < 0.0 {
            params.adaptive_target = -1.0;
        }
        if params.stop.as_ref().is_some_and(TokenTexts::is_empty) {
            params.stop = None;
        }
        if params.watch.as_ref().is_some_and(TokenTexts::is_empty) {
            params.watch = None;
        }
        if params.repetition_detection.is_some_and(|r| !r.is_on()) {
            params.repetition_detection = None;
        }
        params
    }

    /// Whether `field` is set away from its value in `defaults` (the defaults, passed in so
    /// that a loop over the fields builds them once) where the chosen engine has no place for
    /// it.
    pub fn is_outside_engine(&self, field: Field, defaults: &Self) -> bool {
        !field.spec().engines.has(self.engine) && self.get(field) != defaults.get(field)
    }

    /// Whether `field` is at the value its row names as off (in canonical spelling, so that
    /// `top_k: 0` is off as -1 is); a field without an off value never is.
    pub fn is_off(&self, field: Field) -> bool {
        let Some(off) = field.spec().off_value() else {
            return false;
        };
        match (self.normalized().get(field), off) {
            (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
            (value, off) => value == off,
        }
    }
}

impl<'de> Deserialize<'de> for SamplingParams {
    /// Goes through `set` and `validate` so that serde users get the same checks as files.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let text = serde_yaml_ng::to_string(&value).map_err(de::Error::custom)?;
        Self::from_yaml(&text).map_err(de::Error::custom)
    }
}

/// The parameter named `key`, or an error that suggests the nearest name.
pub fn field_named(key: &str) -> Result<Field, ParamError> {
    Field::ALL
        .iter()
        .copied()
        .find(|f| f.name() == key)
        .ok_or_else(|| ParamError::UnknownKey {
            key: key.to_owned(),
            hint: match (
                outside_name(key),
                OTHER_TOOLS_NAMES.iter().find(|(n, ..)| *n == key),
            ) {
                (Some((tool, ours)), _) | (None, Some(&(_, tool, Some(ours)))) => {
                    format!(" ({} `{key}` is samplab's `{ours}`)", possessive(tool))
                }
                (None, Some(&(_, tool, None))) => {
                    format!(" (`{key}` is {tool}'s; samplab has no such sampler)")
                }
                (None, None) => match key.split_once('.') {
                    // `structured_outputs.json=…`: a key inside a field's mapping.
                    Some((head, tail)) if Field::ALL.iter().any(|f| f.name() == head) => {
                        format!(" (`{head}` is set whole, as a mapping: {head}={{{tail}: …}})")
                    }
                    _ => nearest_name(key, Field::ALL.iter().map(|f| f.name()))
                        .map(|f| format!(" (did you mean `{f}`?)"))
                        .unwrap_or_default(),
                },
            },
        })
}

/// `transformers'`, `vLLM's`.
pub fn possessive(name: &str) -> String {
    match name.ends_with('s') {
        true => format!("{name}'"),
        false => format!("{name}'s"),
    }
}

/// The engine whose name for a parameter `key` is, and samplab's name, from the params table.
fn outside_name(key: &str) -> Option<(&'static str, &'static str)> {
    Field::ALL.iter().find_map(|field| {
        let (whose, _) = field.spec().names.every().find(|(_, name)| name == key)?;
        Some((whose, field.name()))
    })
}

/// Names that tools samplab writes nothing for (text-generation-webui, SillyTavern) give
/// parameters, and names the table cannot hold, which people paste: (name, whose, samplab's
/// name or none). Refused all the same, as the engines' names are, so that a preset says one
/// thing in one vocabulary, but the error names the key to write.
const OTHER_TOOLS_NAMES: &[(&str, &str, Option<&str>)] = &[
    ("rep_pen", "SillyTavern", Some("repetition_penalty")),
    ("rep_pen_range", "SillyTavern", Some("repeat_last_n")),
    (
        "do_sample",
        "transformers",
        Some("temperature (0 for greedy)"),
    ),
    ("top_a", "text-generation-webui and SillyTavern", None),
    ("tfs", "text-generation-webui and SillyTavern", None),
    ("tfs_z", "llama.cpp", None),
];

/// Every parameter's name, for messages.
fn field_names() -> String {
    Field::ALL
        .iter()
        .map(|f| f.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The name among `names` a typo of it most likely meant, by edit distance; `None` when none
/// is near (a parameter's, a preset's).
pub fn nearest_name<'a>(typed: &str, names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    names
        .into_iter()
        .map(|name| (edit_distance(typed, name), name))
        .filter(|&(d, name)| d <= 3.max(name.len() / 4))
        .min()
        .map(|(_, name)| name)
}

/// A YAML number as f64; `None` for anything else (null, lists, names).
fn number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

pub(crate) fn typed<T: serde::de::DeserializeOwned>(
    field: Field,
    value: Value,
) -> Result<T, ParamError> {
    let shown = describe(&value);
    let scalar = number(&value);
    let message = match serde_yaml_ng::from_value(value) {
        Ok(typed) => return Ok(typed),
        Err(e) => e.to_string(),
    };
    if let Some((number, range)) = beyond_integer_type(&message) {
        return Err(ParamError::BeyondType {
            field: field.name(),
            value: number.to_owned(),
            range: range_in_words(field, range, scalar.is_some()),
        });
    }
    if !SERDE_MESSAGES
        .iter()
        .any(|start| message.starts_with(start))
    {
        return Err(ParamError::Invalid {
            field: field.name(),
            message,
        });
    }
    Err(ParamError::WrongType {
        field: field.name(),
        message: format!("got {shown}; {}", in_words(&message)),
    })
}

/// How serde's own messages begin; any other message is a type's own explanation (a schema
/// file that is not there), which is no wrong type.
const SERDE_MESSAGES: [&str; 7] = [
    "invalid type",
    "invalid value",
    "invalid length",
    "unknown variant",
    "unknown field",
    "missing field",
    "duplicate field",
];

/// The integer types parameters are read into, by serde's name, with what each holds.
const INTEGER_TYPES: [(&str, i128, i128); 3] = [
    ("u32", 0, u32::MAX as i128),
    ("u64", 0, u64::MAX as i128),
    ("i32", i32::MIN as i128, i32::MAX as i128),
];

/// The number and its type's range from serde's "invalid value: integer `-1`, expected u64":
/// a whole number its type cannot hold.
fn beyond_integer_type(message: &str) -> Option<(&str, (i128, i128))> {
    let rest = message.strip_prefix("invalid value: integer `")?;
    let (number, expected) = rest.split_once("`, expected ")?;
    let (_, lo, hi) = INTEGER_TYPES
        .iter()
        .find(|(name, ..)| *name == expected.trim())?;
    Some((number, (*lo, *hi)))
}

/// `it takes 1 to 4294967295; must be >= 1, or null to run until EOS`: the type's range
/// narrowed to the row's bounds where the value is the field's own number (not one in a list),
/// and the row's words.
fn range_in_words(field: Field, (lo, hi): (i128, i128), scalar: bool) -> String {
    let spec = field.spec();
    let (lo, hi) = match spec.bounds.filter(|_| scalar) {
        Some(b) => {
            // The smallest and largest whole numbers the bounds contain.
            let least = if b.lo_open {
                b.lo.floor() + 1.0
            } else {
                b.lo.ceil()
            };
            let most = if b.hi_open {
                b.hi.ceil() - 1.0
            } else {
                b.hi.floor()
            };
            (
                if least.is_finite() {
                    lo.max(least as i128)
                } else {
                    lo
                },
                if most.is_finite() {
                    hi.min(most as i128)
                } else {
                    hi
                },
            )
        }
        None => (lo, hi),
    };
    match spec.valid() {
        valid if valid.is_empty() => format!("it takes {lo} to {hi}"),
        valid => format!("it takes {lo} to {hi}; {valid}"),
    }
}

/// The YAML parser's word for a number beyond 128 bits, said plainly.
fn too_large(message: String) -> String {
    match message.split_once(" as u128, expected any YAML value") {
        Some((head, tail)) => format!("{head}: too large for any parameter{tail}"),
        None => message,
    }
}

/// serde's "invalid type: .., expected u32" said without Rust's type names.
fn in_words(message: &str) -> String {
    if message.contains(" as u128") || message.contains(" as i128") {
        return "the number is too large for any parameter".to_owned();
    }
    let Some((_, expected)) = message.rsplit_once("expected ") else {
        return message.to_owned();
    };
    let words = match expected.trim() {
        "f32" | "f64" => "a number",
        "i32" | "i64" => "a whole number",
        "u32" | "u64" | "usize" => "a whole number, 0 or more",
        "u8" => "a whole number from 0 to 255",
        "bool" | "a boolean" => "true or false",
        other => other,
    };
    format!("expected {words}")
}

/// A short rendering of a YAML value for error messages.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string {s:?}"),
        Value::Sequence(_) => "a list".to_owned(),
        Value::Mapping(_) => "a mapping".to_owned(),
        Value::Tagged(t) => format!("a value tagged {}", t.tag),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        SamplingParams::from_yaml(text).unwrap_err().to_string()
    }

    #[test]
    fn empty_document_is_defaults() {
        assert_eq!(
            SamplingParams::from_yaml("").unwrap(),
            SamplingParams::default()
        );
        assert_eq!(
            SamplingParams::from_yaml("{}").unwrap(),
            SamplingParams::default()
        );
    }

    #[test]
    fn yaml_and_json_round_trip() {
        let params = SamplingParams {
            max_tokens: Some(64),
            seed: Some(42),
            stop: Some(TokenTexts(vec![
                TokenText::Text("\n\n".into()),
                TokenText::Token(13),
            ])),
            include_stop_str_in_output: true,
            temperature: 0.7,
            top_k: 40,
            top_p: 0.9,
            min_p: 0.05,
            repetition_penalty: 1.1,
            num_samples: 4,
            logprobs: Some(5),
            prompt_logprobs: Some(0),
            logit_bias: Some(LogitBias([(13, -100.0), (7, 2.5)].into())),
            bad_words: Some(vec!["dragon".into()]),
            presence_penalty: 0.5,
            ..Default::default()
        };
        assert_eq!(
            SamplingParams::from_yaml(&params.to_yaml()).unwrap(),
            params
        );
        let json = serde_json::to_string(&params).unwrap();
        assert_eq!(
            serde_json::from_str::<SamplingParams>(&json).unwrap(),
            params
        );
        assert_eq!(
            SamplingParams::from_yaml(&params.to_yaml_non_default()).unwrap(),
            params
        );
    }

    #[test]
    fn non_default_yaml_lists_only_changed_fields() {
        let params = SamplingParams {
            temperature: 0.5,
            ..Default::default()
        };
        assert_eq!(params.to_yaml_non_default(), "temperature: 0.5\n");
        assert_eq!(SamplingParams::default().to_yaml_non_default(), "{}\n");
        let odd = SamplingParams {
            top_p: 0.14,
            repetition_penalty: 1.17,
            ..Default::default()
        };
        assert_eq!(
            odd.to_yaml_non_default(),
            "top_p: 0.14\nrepetition_penalty: 1.17\n"
        );
    }

    #[test]
    fn normalized_spells_equal_settings_one_way() {
        let mut odd = SamplingParams::from_yaml("top_k: 0\nstop: []\ntop_p: 0.5").unwrap();
        assert_ne!(odd, SamplingParams::from_yaml("top_p: 0.5").unwrap());
        odd = odd.normalized();
        assert_eq!(odd, SamplingParams::from_yaml("top_p: 0.5").unwrap());
        assert_eq!(odd.to_yaml_non_default(), "top_p: 0.5\n");
        let kept = SamplingParams::from_yaml("top_k: 5\nstop: [\"x\"]").unwrap();
        assert_eq!(kept.normalized(), kept);
    }

    #[test]
    fn stop_accepts_string_list_and_ids() {
        let one = SamplingParams::from_yaml("stop: \"\\n\\n\"").unwrap();
        assert_eq!(
            one.stop,
            Some(TokenTexts(vec![TokenText::Text("\n\n".into())]))
        );
        let list = SamplingParams::from_yaml("stop: [\"a\", \"bc\"]").unwrap();
        assert_eq!(
            list.stop.unwrap().strings().collect::<Vec<_>>(),
            ["a", "bc"]
        );
        let ids = SamplingParams::from_yaml("stop: [13, 2]").unwrap();
        assert_eq!(ids.stop.unwrap().token_ids().collect::<Vec<_>>(), [13, 2]);
    }

    #[test]
    fn unknown_key_is_named_with_a_suggestion() {
        let message = err("tempature: 0.5");
        assert!(message.contains("`tempature`"), "{message}");
        assert!(message.contains("did you mean `temperature`"), "{message}");
        // Types are said in words, not Rust's names.
        for (yaml, said) in [
            (
                "temperature: abc",
                "got the string \"abc\"; expected a number",
            ),
            ("seed: abc", "expected a whole number, 0 or more"),
            ("seed: -1", "or null for a random one"),
            ("max_tokens: 99999999999999999999", "too large"),
        ] {
            let message = err(yaml);
            assert!(
                message.contains(said) && !message.contains("u64"),
                "{message}"
            );
        }
        for (key, said) in [
            ("temp", "llama.cpp's `temp` is samplab's `temperature`"),
            ("rep_pen", "`rep_pen` is samplab's `repetition_penalty`"),
            ("top_a", "samplab has no such sampler"),
            // Read from the params table's names.
            (
                "repeat_penalty",
                "llama.cpp's `repeat_penalty` is samplab's `repetition_penalty`",
            ),
            (
                "top_nsigma",
                "llama.cpp's `top_nsigma` is samplab's `top_n_sigma`",
            ),
            (
                "mirostat_ent",
                "llama.cpp's `mirostat_ent` is samplab's `mirostat_tau`",
            ),
            ("n", "vLLM's `n` is samplab's `num_samples`"),
            (
                "max_new_tokens",
                "transformers' `max_new_tokens` is samplab's `max_tokens`",
            ),
            (
                "sequence_bias",
                "transformers' `sequence_bias` is samplab's `logit_bias`",
            ),
        ] {
            let message = SamplingParams::from_yaml(&format!("{key}: 1"))
                .unwrap_err()
                .to_string();
            assert!(message.contains(said), "{message}");
        }
    }

    #[test]
    fn refusals_say_the_rows_bounds_and_off_value_in_words() {
        let said = |field: Field| field.spec().valid().into_owned();
        assert_eq!(said(Field::TopP), "must be in (0, 1]; 1 is off");
        assert_eq!(said(Field::NumSamples), "must be in 1..=64");
        assert_eq!(said(Field::DryBase), "must be a finite number >= 1");
        assert_eq!(said(Field::DryAllowedLength), "must be >= 1");
        assert_eq!(said(Field::Logprobs), "must be in 0..=20, or null for none");
        assert_eq!(said(Field::PresencePenalty), "must be in [-2, 2]; 0 is off");
        for &field in Field::ALL {
            if field.spec().bounds.is_some() {
                assert!(!said(field).is_empty(), "{}", field.name());
            }
        }
        let message = SamplingParams::from_yaml("top_p: 1.5")
            .and_then(|p| p.validate())
            .unwrap_err()
            .to_string();
        assert_eq!(
            message,
            "`top_p` = 1.5 is invalid: must be in (0, 1]; 1 is off"
        );
    }

    #[test]
    fn every_invalid_value_names_its_field() {
        let cases = [
            ("max_tokens: 0", "max_tokens"),
            ("max_tokens: -3", "max_tokens"),
            ("seed: -1", "seed"),
            ("seed: abc", "seed"),
            ("stop: \"\"", "stop"),
            ("stop: [\"ok\", \"\"]", "stop"),
            ("stop: [-1]", "stop"),
            ("stop: {a: 1}", "stop"),
            (
                "include_stop_str_in_output: maybe",
                "include_stop_str_in_output",
            ),
            ("temperature: -0.1", "temperature"),
            ("temperature: .nan", "temperature"),
            ("temperature: .inf", "temperature"),
            ("temperature: hot", "temperature"),
            ("top_k: -2", "top_k"),
            ("top_k: 1.5", "top_k"),
            ("top_p: 0", "top_p"),
            ("top_p: 1.01", "top_p"),
            ("top_p: .nan", "top_p"),
            ("min_p: -0.01", "min_p"),
            ("min_p: 1.5", "min_p"),
            ("repetition_penalty: 0", "repetition_penalty"),
            ("repetition_penalty: -1", "repetition_penalty"),
            ("repetition_penalty: .inf", "repetition_penalty"),
            ("num_samples: 0", "num_samples"),
            ("num_samples: 65", "num_samples"),
            ("num_samples: [1]", "num_samples"),
            ("logprobs: 21", "logprobs"),
            ("logprobs: -1", "logprobs"),
            ("prompt_logprobs: 99", "prompt_logprobs"),
        ];
        for (text, field) in cases {
            let message = err(text);
            assert!(
                message.contains(&format!("`{field}`")),
                "{text}: message does not name {field}: {message}"
            );
        }
    }

    #[test]
    fn range_errors_show_value_and_range() {
        let message = err("top_p: 1.5");
        assert!(message.contains("1.5"), "{message}");
        assert!(message.contains("(0, 1]"), "{message}");
    }

    #[test]
    fn non_mapping_and_bad_syntax_are_errors() {
        assert!(matches!(
            SamplingParams::from_yaml("- 1\n- 2"),
            Err(ParamError::NotAMapping(_))
        ));
        assert!(matches!(
            SamplingParams::from_yaml("temperature: [1"),
            Err(ParamError::Syntax(_))
        ));
    }

    #[test]
    fn boundaries_are_accepted() {
        let ok = "temperature: 0\ntop_k: 0\ntop_p: 1\nmin_p: 1\nnum_samples: 64\nlogprobs: 20\nprompt_logprobs: 0\nmax_tokens: 1\nseed: 18446744073709551615";
        let params = SamplingParams::from_yaml(ok).unwrap();
        assert!(params.is_greedy());
        assert_eq!(params.top_k_limit(), None);
        assert_eq!(params.seed, Some(u64::MAX));
    }

    #[test]
    fn set_refuses_tagged_values_like_files_do() {
        let mut params = SamplingParams::default();
        let message = params
            .set_assignment("temperature=!custom 5")
            .unwrap_err()
            .to_string();
        assert!(message.contains("temperature"), "{message}");
        assert_eq!(params.temperature, 1.0);
    }

    #[test]
    fn a_gbnf_grammar_is_taken_as_written_unless_quoted_or_a_block() {
        let gbnf = "# a person\nroot ::= \"{\\\"name\\\": \" name \"}\"\nname ::= [a-z]+";
        let mut params = SamplingParams {
            engine: Engine::LlamaCpp,
            ..SamplingParams::default()
        };
        params.set_assignment(&format!("grammar={gbnf}")).unwrap();
        assert_eq!(params.grammar.as_deref(), Some(gbnf));
        params
            .set_assignment("grammar=|-\n  root ::= \"a\"\n  b ::= \"c\"")
            .unwrap();
        assert_eq!(
            params.grammar.as_deref(),
            Some("root ::= \"a\"\nb ::= \"c\"")
        );
    }

    #[test]
    fn a_stop_value_that_opens_yaml_and_does_not_parse_is_refused() {
        let mut params = SamplingParams::default();
        for broken in [r#"["unclosed"#, r#""unclosed"#, "{a: 1"] {
            let err = params
                .set_assignment(&format!("stop={broken}"))
                .unwrap_err();
            assert!(err.to_string().contains("stop"), "{broken}: {err}");
            assert_eq!(params.stop, None, "{broken}");
        }
        params.set_assignment("stop=The End").unwrap();
        let text = |s: &str| TokenText::Text(s.to_owned());
        assert_eq!(params.stop, Some(TokenTexts(vec![text("The End")])));
        params.set_assignment(r#"stop=["\n\n", 13]"#).unwrap();
        assert_eq!(
            params.stop,
            Some(TokenTexts(vec![text("\n\n"), TokenText::Token(13)]))
        );
    }

    #[test]
    fn set_text_keeps_old_value_on_error() {
        let mut params = SamplingParams::default();
        params.set_text("temperature", "0.3").unwrap();
        assert_eq!(params.temperature, 0.3);
        assert!(params.set_text("temperature", "-2").is_err());
        assert_eq!(params.temperature, 0.3);
        params.set_assignment("stop=[\"\\n\\n\"]").unwrap();
        assert_eq!(params.stop.as_ref().unwrap().strings().next(), Some("\n\n"));
        params.set_assignment("stop=The End").unwrap();
        assert_eq!(params.stop.unwrap().strings().next(), Some("The End"));
        params = SamplingParams::default();
        params.set_assignment("max_tokens=").unwrap();
        assert_eq!(params.max_tokens, None);
        assert!(matches!(
            params.set_assignment("temperature"),
            Err(ParamError::NotAnAssignment(_))
        ));
    }
}
