//! Lists of strings and token ids in any mix: `stop` as vLLM takes it, and `watch`.

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A string (matched on text, or tokenized) or a token id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TokenText {
    Text(String),
    Token(u32),
}

/// A string, a list of strings, a list of token ids, or a mix of both.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TokenTexts(pub Vec<TokenText>);

impl TokenText {
    /// How the item is named in results: the string itself, or `#13`.
    pub fn name(&self) -> String {
        match self {
            TokenText::Text(text) => text.clone(),
            TokenText::Token(id) => format!("#{id}"),
        }
    }
}

impl TokenTexts {
    pub fn strings(&self) -> impl Iterator<Item = &str> {
        self.0.iter().filter_map(|item| match item {
            TokenText::Text(s) => Some(s.as_str()),
            TokenText::Token(_) => None,
        })
    }

    pub fn token_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().filter_map(|item| match item {
            TokenText::Token(id) => Some(*id),
            TokenText::Text(_) => None,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for TokenTexts {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for item in &self.0 {
            match item {
                TokenText::Text(s) => seq.serialize_element(s)?,
                TokenText::Token(id) => seq.serialize_element(id)?,
            }
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for TokenTexts {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StopVisitor;

        impl<'de> Visitor<'de> for StopVisitor {
            type Value = TokenTexts;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string, a list of strings, or a list of token ids")
            }

            fn visit_str<E: de::Error>(self, s: &str) -> Result<TokenTexts, E> {
                Ok(TokenTexts(vec![TokenText::Text(s.to_owned())]))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<TokenTexts, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<StopElement>()? {
                    items.push(item.0);
                }
                Ok(TokenTexts(items))
            }
        }

        deserializer.deserialize_any(StopVisitor)
    }
}

/// One element of a list.
struct StopElement(TokenText);

impl<'de> Deserialize<'de> for StopElement {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ElementVisitor;

        impl Visitor<'_> for ElementVisitor {
            type Value = StopElement;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or a token id (a whole number >= 0)")
            }

            fn visit_str<E: de::Error>(self, s: &str) -> Result<StopElement, E> {
                Ok(StopElement(TokenText::Text(s.to_owned())))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<StopElement, E> {
                u32::try_from(v)
                    .map(|id| StopElement(TokenText::Token(id)))
                    .map_err(|_| E::custom(format!("token id {v} is larger than {}", u32::MAX)))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<StopElement, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::custom(format!("token id {v} is negative"))),
                }
            }
        }

        deserializer.deserialize_any(ElementVisitor)
    }
}
