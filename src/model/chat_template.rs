//! The model's chat template (GGUF `tokenizer.chat_template`, or tokenizer_config.json /
//! chat_template.jinja beside an HF model), rendered with minijinja the way transformers'
//! `apply_chat_template(messages, add_generation_prompt=True)` renders it.
//!
//! Templates are written for Python's Jinja, so Python's string and dict methods (`strip`,
//! `startswith`, `items`) are provided, and `raise_exception` becomes an error that says what
//! the template refused.

use minijinja::{Environment, Error, ErrorKind, context};
use serde_json::Value as Json;
use std::io::Write;
use std::path::Path;

/// Steps a template may take for one message: real templates take a few thousand, and a loop of
/// 1e5 x 1e5 would otherwise never end.
const FUEL: u64 = 5_000_000;
/// Bytes a rendered prompt may hold beyond the message itself (a template that repeats the
/// message, or a long system prompt, stays far below).
const MAX_RENDERED_EXTRA: usize = 4 << 20;

#[derive(Debug, Clone, PartialEq)]
pub struct ChatTemplate {
    source: String,
    bos_token: String,
    eos_token: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ChatTemplateError {
    #[error("cannot read {path}: {message}")]
    Read { path: String, message: String },
    #[error("the chat template does not render: {0}")]
    Render(String),
    #[error(
        "the chat template does not finish: it ran out of its {FUEL} steps (a loop too long \
         for one message)"
    )]
    OutOfFuel,
    #[error("the chat template renders more than {0} bytes for one message")]
    TooLong(usize),
}

impl ChatTemplate {
    pub fn new(source: String, bos_token: String, eos_token: String) -> Self {
        Self {
            source,
            bos_token,
            eos_token,
        }
    }

    /// The template of an HF model directory: chat_template.jinja if present, else the
    /// `chat_template` of tokenizer_config.json (a string, or a list of named templates of which
    /// `default` is taken). `None` when the model has none.
    pub fn from_hf_dir(dir: &Path) -> Result<Option<Self>, ChatTemplateError> {
        let config_path = dir.join("tokenizer_config.json");
        let config: Json = match crate::regular_file::read_to_string(&config_path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| ChatTemplateError::Read {
                path: config_path.display().to_string(),
                message: e.to_string(),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Json::Null,
            Err(e) => {
                return Err(ChatTemplateError::Read {
                    path: config_path.display().to_string(),
                    message: e.to_string(),
                });
            }
        };
        let jinja_path = dir.join("chat_template.jinja");
        let source = match crate::regular_file::read_to_string(&jinja_path) {
            Ok(text) => Some(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => template_in_config(&config),
            Err(e) => {
                return Err(ChatTemplateError::Read {
                    path: jinja_path.display().to_string(),
                    message: e.to_string(),
                });
            }
        };
        Ok(source.map(|source| {
            Self::new(
                source,
                token_in_config(&config, "bos_token"),
                token_in_config(&config, "eos_token"),
            )
        }))
    }

    /// The prompt text for one user message, ending where the assistant's answer begins.
    pub fn render(&self, user_message: &str) -> Result<String, ChatTemplateError> {
        let mut env = Environment::new();
        env.set_fuel(Some(FUEL));
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |message: String| -> Result<(), Error> {
            Err(Error::new(ErrorKind::InvalidOperation, message))
        });
        let template = env
            .template_from_str(&self.source)
            .map_err(|e| ChatTemplateError::Render(describe(&e)))?;
        let messages = vec![context! { role => "user", content => user_message }];
        let limit = user_message.len().saturating_add(MAX_RENDERED_EXTRA);
        let mut out = Capped {
            text: Vec::new(),
            limit,
        };
        let rendered = template.render_captured_to(
            context! {
                messages,
                add_generation_prompt => true,
                bos_token => &self.bos_token,
                eos_token => &self.eos_token,
            },
            &mut out,
        );
        match rendered {
            Ok(_) => {
                String::from_utf8(out.text).map_err(|e| ChatTemplateError::Render(e.to_string()))
            }
            Err(e) if e.kind() == ErrorKind::OutOfFuel => Err(ChatTemplateError::OutOfFuel),
            Err(_) if out.text.len() >= limit => Err(ChatTemplateError::TooLong(limit)),
            Err(e) => Err(ChatTemplateError::Render(describe(&e))),
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

/// minijinja's error with the line it happened on, when it knows it.
fn describe(error: &Error) -> String {
    match error.line() {
        Some(line) => format!("{error:#} (template line {line})"),
        None => format!("{error:#}"),
    }
}

fn template_in_config(config: &Json) -> Option<String> {
    match config.get("chat_template")? {
        Json::String(source) => Some(source.clone()),
        Json::Array(named) => named
            .iter()
            .find(|t| t.get("name").and_then(Json::as_str) == Some("default"))
            .and_then(|t| t.get("template")?.as_str())
            .map(str::to_owned),
        _ => None,
    }
}

/// A special token as tokenizer_config.json writes it: a string or `{"content": ...}`.
fn token_in_config(config: &Json, key: &str) -> String {
    match config.get(key) {
        Some(Json::String(token)) => token.clone(),
        Some(token) => token
            .get("content")
            .and_then(Json::as_str)
            .unwrap_or_default()
            .to_owned(),
        None => String::new(),
    }
}
