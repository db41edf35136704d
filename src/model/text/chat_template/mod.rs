//! The model's chat template (GGUF `tokenizer.chat_template`, or tokenizer_config.json /
//! chat_template.jinja beside an HF model), rendered with minijinja the way transformers'
//! `apply_chat_template(messages, add_generation_prompt=True)` renders it.
//!
//! Templates are written for Python's Jinja2 in transformers' environment (rebuilt in
//! environment.rs); the prompt a model was trained on is the one that environment renders, so
//! samplab renders the same bytes.

use minijinja::{Error, ErrorKind, Value};
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

mod choice;
mod clock;
mod environment;
mod percent;
mod printf;
mod python;
mod tojson;

pub use choice::{ModelTemplates, TemplateChoice};
pub use clock::{CivilTime, Clock};
use environment::{FUEL, Refusal, environment, open_generation_blocks};

/// Bytes a rendered prompt may hold beyond the messages themselves (a template that repeats a
/// message, or a long system prompt, stays far below).
const MAX_RENDERED_EXTRA: usize = 4 << 20;

/// The special tokens transformers passes to every template (its `special_tokens_map`).
const SPECIAL_TOKENS: [&str; 7] = [
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
];

/// Special-token texts by name (`bos_token` ...): only the tokens the model has, so a template
/// sees a missing one as undefined, as under transformers.
pub type SpecialTokens = BTreeMap<String, String>;

/// One turn of a conversation, as `apply_chat_template` takes it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn new(role: &str, content: &str) -> Self {
        Self {
            role: role.to_owned(),
            content: content.to_owned(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatTemplate {
    source: String,
    tokens: SpecialTokens,
    clock: Clock,
}

#[derive(Debug, thiserror::Error)]
pub enum ChatTemplateError {
    #[error("cannot read {path}: {message}")]
    Read { path: String, message: String },
    #[error("the chat template does not render: {0}")]
    Render(String),
    #[error("the chat template refuses these messages: {0}")]
    Refused(String),
    #[error(
        "the chat template does not finish: it ran out of its {FUEL} steps (a loop too long \
         for these messages)"
    )]
    OutOfFuel,
    #[error("the chat template renders more than {0} bytes for these messages")]
    TooLong(usize),
}

impl ChatTemplate {
    pub fn new(source: String, tokens: SpecialTokens) -> Self {
        Self {
            source,
            tokens,
            clock: Clock::System,
        }
    }

    /// The same template reading `strftime_now` from `clock`.
    pub fn with_clock(self, clock: Clock) -> Self {
        Self { clock, ..self }
    }

    /// The template of an HF model directory: chat_template.jinja if present, else the
    /// `chat_template` of tokenizer_config.json (a string, or a list of named templates of which
    /// `default` is taken), with the model's special tokens. `None` when the model has none.
    pub fn from_hf_dir(dir: &Path) -> Result<Option<Self>, ChatTemplateError> {
        Ok(Self::templates_of_hf_dir(dir)?.default_template())
    }

    /// Every template of an HF model directory (see [`Self::from_hf_dir`]), the named ones of a
    /// tokenizer_config.json list included.
    pub fn templates_of_hf_dir(dir: &Path) -> Result<ModelTemplates, ChatTemplateError> {
        let config = read_json(&dir.join("tokenizer_config.json"))?.unwrap_or(Json::Null);
        let (source, named) = match read_if_present(&dir.join("chat_template.jinja"))? {
            Some(text) => (Some(text), named_in_config(&config)),
            None => templates_in_config(&config),
        };
        let mut tokens = tokens_in_config(&config);
        // Older directories keep their special tokens in special_tokens_map.json: transformers
        // reads it when tokenizer_config.json has no `added_tokens_decoder`, and it then wins.
        if config.get("added_tokens_decoder").is_none()
            && let Some(map) = read_json(&dir.join("special_tokens_map.json"))?
        {
            tokens.extend(tokens_in_config(&map));
        }
        Ok(ModelTemplates::new(source, named, tokens))
    }

    /// The prompt text for one user message, ending where the assistant's answer begins.
    pub fn render(&self, user_message: &str) -> Result<String, ChatTemplateError> {
        self.render_messages(&[Message::new("user", user_message)])
    }

    /// The prompt text for a conversation, as
    /// `apply_chat_template(messages, add_generation_prompt=True, tokenize=False)` renders it:
    /// no tools and no documents (both `none`, so `tools is defined` holds as it does there).
    pub fn render_messages(&self, messages: &[Message]) -> Result<String, ChatTemplateError> {
        let source = percent::rewrite(&open_generation_blocks(&self.source));
        let env = environment(self.clock);
        let template = env
            .template_from_str(&source)
            .map_err(|e| describe(&e, &source))?;
        let mut vars: BTreeMap<&str, Value> = self
            .tokens
            .iter()
            .map(|(name, text)| (name.as_str(), Value::from(text.as_str())))
            .collect();
        let messages_value = messages.iter().map(|m| {
            Value::from_pairs([("role", m.role.as_str()), ("content", m.content.as_str())])
        });
        vars.insert("messages", Value::from_iter(messages_value));
        vars.insert("add_generation_prompt", Value::from(true));
        vars.insert("tools", Value::from(()));
        vars.insert("documents", Value::from(()));
        let given: usize = messages.iter().map(|m| m.content.len()).sum();
        let limit = given.saturating_add(MAX_RENDERED_EXTRA);
        let mut out = Capped {
            text: Vec::new(),
            limit,
        };
        match template.render_captured_to(Value::from_pairs(vars), &mut out) {
            Ok(_) => {
                String::from_utf8(out.text).map_err(|e| ChatTemplateError::Render(e.to_string()))
            }
            Err(e) if e.kind() == ErrorKind::OutOfFuel => Err(ChatTemplateError::OutOfFuel),
            Err(_) if out.text.len() >= limit => Err(ChatTemplateError::TooLong(limit)),
            Err(e) => Err(describe(&e, &source)),
        }
    }
}

/// Collects rendered output up to `limit` bytes, then refuses more.
struct Capped {
    text: Vec<u8>,
    limit: usize,
}

impl Write for Capped {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if self.text.len() + bytes.len() > self.limit {
            self.text
                .extend_from_slice(&bytes[..self.limit - self.text.len()]);
            return Err(std::io::Error::other("the rendered prompt is too long"));
        }
        self.text.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One line: what went wrong and where in the template (line and column), without minijinja's
/// dump of the template around it, which would spill a long template over the screen.
fn describe(error: &Error, source: &str) -> ChatTemplateError {
    let refused = std::error::Error::source(error).is_some_and(|s| s.is::<Refusal>());
    let what = match (refused, error.detail()) {
        (true, Some(message)) => message.to_owned(),
        (false, Some(detail)) => format!("{}: {detail}", error.kind()),
        (_, None) => error.kind().to_string(),
    };
    let what = what.split_whitespace().collect::<Vec<_>>().join(" ");
    let place = match (error.range(), error.line()) {
        (Some(range), _) if range.start <= source.len() => {
            let before = &source[..range.start];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
            format!(" (template line {line}, column {column})")
        }
        (_, Some(line)) => format!(" (template line {line})"),
        _ => String::new(),
    };
    if refused {
        ChatTemplateError::Refused(format!("{what}{place}"))
    } else {
        ChatTemplateError::Render(format!("{what}{place}"))
    }
}

/// A file's text, `None` when it does not exist.
fn read_if_present(path: &Path) -> Result<Option<String>, ChatTemplateError> {
    match crate::regular_file::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ChatTemplateError::Read {
            path: path.display().to_string(),
            message: e.to_string(),
        }),
    }
}

fn read_json(path: &Path) -> Result<Option<Json>, ChatTemplateError> {
    let Some(text) = read_if_present(path)? else {
        return Ok(None);
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| ChatTemplateError::Read {
            path: path.display().to_string(),
            message: e.to_string(),
        })
}

/// tokenizer_config.json's `chat_template`: one template, or a list of named ones (`default`
/// among them is the default, which [`ModelTemplates::new`] takes out).
fn templates_in_config(config: &Json) -> (Option<String>, Vec<(String, String)>) {
    match config.get("chat_template") {
        Some(Json::String(source)) => (Some(source.clone()), Vec::new()),
        _ => (None, named_in_config(config)),
    }
}

fn named_in_config(config: &Json) -> Vec<(String, String)> {
    let Some(Json::Array(named)) = config.get("chat_template") else {
        return Vec::new();
    };
    named
        .iter()
        .filter_map(|t| {
            let name = t.get("name")?.as_str()?;
            let source = t.get("template")?.as_str()?;
            Some((name.to_owned(), source.to_owned()))
        })
        .collect()
}

/// The special tokens of tokenizer_config.json, each a string or `{"content": ...}`; a `null`
/// or absent token is left out.
fn tokens_in_config(config: &Json) -> SpecialTokens {
    SPECIAL_TOKENS
        .iter()
        .filter_map(|&name| {
            let token = config.get(name)?;
            let text = token.as_str().or_else(|| token.get("content")?.as_str())?;
            Some((name.to_owned(), text.to_owned()))
        })
        .collect()
}
