//! Which of a model's chat templates a chat run renders with: the one it ships as its default,
//! one of its named templates, or a Jinja file of the user's (`--chat-template NAME|FILE`, as
//! transformers' `chat_template=` and llama.cpp's `--chat-template-file`).

use super::{ChatTemplate, SpecialTokens};
use std::path::Path;

/// The name under which a list of named templates keeps the one used by default.
const DEFAULT_NAME: &str = "default";

/// Bytes a template file may hold: templates are a few kilobytes; a larger file is not one.
const MAX_TEMPLATE_FILE: u64 = 1 << 20;

/// What `--chat-template` names: an existing file (a Jinja text of the user's), else the name
/// of one of the model's templates. Decided once, here, for loading and for exports alike.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TemplateChoice<'a> {
    File(&'a Path),
    Name(&'a str),
}

impl<'a> TemplateChoice<'a> {
    pub fn of(choice: &'a str) -> Self {
        let path = Path::new(choice);
        match path.is_file() {
            true => Self::File(path),
            false => Self::Name(choice),
        }
    }
}

/// Every template a model ships, with the special tokens a template is given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelTemplates {
    default: Option<String>,
    /// By name, in the file's order, without `default`.
    named: Vec<(String, String)>,
    tokens: SpecialTokens,
}

impl ModelTemplates {
    /// `named` may hold the default under the name `default`, as transformers' lists do.
    pub fn new(
        default: Option<String>,
        named: Vec<(String, String)>,
        tokens: SpecialTokens,
    ) -> Self {
        let mut default = default;
        let mut rest = Vec::new();
        for (name, source) in named {
            match name == DEFAULT_NAME {
                true => default = default.or(Some(source)),
                false => rest.push((name, source)),
            }
        }
        Self {
            default,
            named: rest,
            tokens,
        }
    }

    /// The template a chat run uses unless told otherwise.
    pub fn default_template(&self) -> Option<ChatTemplate> {
        let source = self.default.clone()?;
        Some(ChatTemplate::new(source, self.tokens.clone()))
    }

    /// The names `--chat-template` takes for this model.
    pub fn names(&self) -> Vec<&str> {
        self.named.iter().map(|(name, _)| name.as_str()).collect()
    }

    /// Why a model with named templates has no default, and what to do, to follow the model's
    /// name: "has named chat templates (...) but ..."; `None` otherwise.
    pub fn missing_default(&self) -> Option<String> {
        (self.default.is_none() && !self.named.is_empty()).then(|| {
            format!(
                "has named chat templates ({}) but none called `{DEFAULT_NAME}`: chat runs \
                 need one chosen with --chat-template NAME",
                self.names().join(", ")
            )
        })
    }

    /// `--chat-template`'s template: an existing file's text, else the model's template of that
    /// name (`default` included).
    pub fn choose(&self, choice: &str) -> Result<ChatTemplate, String> {
        let name = match TemplateChoice::of(choice) {
            TemplateChoice::File(path) => return self.read_file(path),
            TemplateChoice::Name(name) => name,
        };
        let source = match name {
            DEFAULT_NAME => self.default.as_ref(),
            name => self.named.iter().find(|(n, _)| n == name).map(|(_, s)| s),
        };
        if let Some(source) = source {
            return Ok(ChatTemplate::new(source.clone(), self.tokens.clone()));
        }
        let mut names = self.names();
        if self.default.is_some() {
            names.insert(0, DEFAULT_NAME);
        }
        let known = match names.is_empty() {
            true => "the model has no named templates".to_owned(),
            false => format!("the model's templates are {}", names.join(", ")),
        };
        Err(format!(
            "--chat-template `{choice}` is neither a Jinja file nor a template of the model \
             ({known})"
        ))
    }

    fn read_file(&self, path: &Path) -> Result<ChatTemplate, String> {
        let shown = path.display();
        let size = std::fs::metadata(path).map_or(0, |m| m.len());
        if size > MAX_TEMPLATE_FILE {
            return Err(format!(
                "the chat template file {shown} holds {size} bytes: a template is a Jinja text \
                 of a few kilobytes (at most {MAX_TEMPLATE_FILE})"
            ));
        }
        let source = crate::regular_file::read_to_string(path)
            .map_err(|e| format!("cannot read the chat template file {shown}: {e}"))?;
        Ok(ChatTemplate::new(source, self.tokens.clone()))
    }
}
