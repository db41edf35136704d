//! The `stop` field: stop strings and stop token ids, in any mix, as vLLM takes them.

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};
use std::fmt;

/// One stop condition: a string matched on generated text, or a token id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StopItem {
    Text(String),
    Token(u32),
}

/// The `stop` field: a string, a list of strings, a list of token ids, or a mix of both.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stop(pub Vec<StopItem>);

impl Stop {
    pub fn strings(&self) -> impl Iterator<Item = &str> {
        self.0.iter().filter_map(|item| match item {
            StopItem::Text(s) => Some(s.as_str()),
            StopItem::Token(_) => None,
        })
    }

    pub fn token_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().filter_map(|item| match item {
            StopItem::Token(id) => Some(*id),
            StopItem::Text(_) => None,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for Stop {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for item in &self.0 {
            match item {
                StopItem::Text(s) => seq.serialize_element(s)?,
                StopItem::Token(id) => seq.serialize_element(id)?,
            }
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for Stop {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StopVisitor;

        impl<'de> Visitor<'de> for StopVisitor {
            type Value = Stop;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string, a list of strings, or a list of token ids")
            }

            fn visit_str<E: de::Error>(self, s: &str) -> Result<Stop, E> {
                Ok(Stop(vec![StopItem::Text(s.to_owned())]))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Stop, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<StopElement>()? {
                    items.push(item.0);
                }
                Ok(Stop(items))
            }
        }

        deserializer.deserialize_any(StopVisitor)
    }
}

/// One element of a `stop` list.
struct StopElement(StopItem);

impl<'de> Deserialize<'de> for StopElement {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ElementVisitor;

        impl Visitor<'_> for ElementVisitor {
            type Value = StopElement;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a stop string or a token id (a whole number >= 0)")
            }

            fn visit_str<E: de::Error>(self, s: &str) -> Result<StopElement, E> {
                Ok(StopElement(StopItem::Text(s.to_owned())))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<StopElement, E> {
                u32::try_from(v)
                    .map(|id| StopElement(StopItem::Token(id)))
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
