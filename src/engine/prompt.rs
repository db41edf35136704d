//! What a run is asked about: raw text, or a conversation that each model renders through its
//! own chat template, so that compared models see the same conversation each in its own format.

use crate::model::text::chat_template::Message;
use crate::response::PromptText;

#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    /// Text the model continues as it is (BOS added as the model wants); special-token text
    /// (`<|im_start|>`) becomes the control token, as vLLM, transformers and llama-server read
    /// a raw prompt.
    Raw(String),
    /// Raw text whose special-token text stays plain text (llama.cpp's `parse_special =
    /// false`).
    Literal(String),
    /// A conversation, rendered by the chat template of whichever model runs or scores it.
    Chat(Conversation),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    /// A system message, earlier turns and the last user message: what the template gets.
    pub messages: Vec<Message>,
    /// Special-token text typed into the last user message (`<|im_end|>`) stays plain text
    /// instead of becoming the control token, as transformers would make it.
    pub literal_specials: bool,
}

impl Prompt {
    pub fn raw(text: &str) -> Self {
        Prompt::Raw(text.to_owned())
    }

    /// Raw text, its special-token text kept as text where `literal`.
    pub fn raw_with(text: &str, literal: bool) -> Self {
        match literal {
            true => Prompt::Literal(text.to_owned()),
            false => Prompt::raw(text),
        }
    }

    /// A conversation with special-token text becoming control tokens, as in transformers.
    pub fn chat(messages: Vec<Message>) -> Self {
        Prompt::Chat(Conversation {
            messages,
            literal_specials: false,
        })
    }

    /// What the user typed: the raw text, or the conversation's last user message.
    pub fn text(&self) -> &str {
        match self {
            Prompt::Raw(text) | Prompt::Literal(text) => text,
            Prompt::Chat(conversation) => conversation.last_user().unwrap_or(""),
        }
    }

    pub fn is_chat(&self) -> bool {
        matches!(self, Prompt::Chat(_))
    }

    /// The conversation's messages; none for raw text.
    pub fn messages(&self) -> &[Message] {
        match self {
            Prompt::Raw(_) | Prompt::Literal(_) => &[],
            Prompt::Chat(conversation) => &conversation.messages,
        }
    }

    /// The prompt as a response keeps it, with what the chat template `rendered` of it.
    pub fn record(&self, rendered: Option<String>) -> PromptText {
        PromptText {
            text: self.text().to_owned(),
            chat: self.is_chat(),
            messages: self.messages().to_vec(),
            rendered,
            literal_specials: match self {
                Prompt::Raw(_) => false,
                Prompt::Literal(_) => true,
                Prompt::Chat(conversation) => conversation.literal_specials,
            },
        }
    }

    /// The prompt a response kept (see [`Prompt::record`]), to run it again; a chat prompt
    /// needs its messages.
    pub fn from_record(record: &PromptText) -> Result<Self, String> {
        if !record.chat {
            return Ok(Prompt::raw_with(&record.text, record.literal_specials));
        }
        if record.messages.is_empty() {
            return Err(
                "its prompt is a chat prompt without `messages`: the conversation the \
                        template got is missing"
                    .to_owned(),
            );
        }
        Ok(Prompt::Chat(Conversation {
            messages: record.messages.clone(),
            literal_specials: record.literal_specials,
        }))
    }
}

impl Conversation {
    /// The content of the last user message.
    pub fn last_user(&self) -> Option<&str> {
        self.messages
            .iter()
            .rev()
            .find(|m| m.role == "user")
            .map(|m| m.content.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_the_raw_text_or_the_last_user_message() {
        assert_eq!(Prompt::raw("Once").text(), "Once");
        let chat = Prompt::chat(vec![
            Message::new("system", "Be brief."),
            Message::new("user", "Hi"),
            Message::new("assistant", "Hello"),
            Message::new("user", "Bye"),
            Message::new("assistant", ""),
        ]);
        assert_eq!(chat.text(), "Bye");
        assert!(chat.is_chat() && !Prompt::raw("x").is_chat());
        assert_eq!(chat.messages().len(), 5);
        assert!(Prompt::raw("x").messages().is_empty());
        assert_eq!(Prompt::chat(vec![Message::new("system", "s")]).text(), "");
    }
}
