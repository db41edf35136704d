//! `logit_bias`: token id -> bias added to its logit, as OpenAI's API and vLLM take it.

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// vLLM and llama.cpp's server clamp every bias into this range (OpenAI's documented range).
pub const BIAS_LIMIT: f32 = 100.0;

/// Token ids to biases; JSON writes the ids as strings, YAML as numbers, and both read back.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct LogitBias(pub BTreeMap<u32, f32>);

impl LogitBias {
    /// Each bias as the engines apply it: clamped to ±[`BIAS_LIMIT`].
    pub fn applied(&self) -> impl Iterator<Item = (u32, f32)> + '_ {
        self.0
            .iter()
            .map(|(&id, &bias)| (id, bias.clamp(-BIAS_LIMIT, BIAS_LIMIT)))
    }
}

impl<'de> Deserialize<'de> for LogitBias {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct BiasVisitor;

        impl<'de> Visitor<'de> for BiasVisitor {
            type Value = LogitBias;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a mapping of token ids to biases, e.g. {13: -100, 42: 5.5}")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LogitBias, A::Error> {
                let mut biases = BTreeMap::new();
                while let Some((id, bias)) = map.next_entry::<TokenKey, f32>()? {
                    biases.insert(id.0, bias);
                }
                Ok(LogitBias(biases))
            }
        }

        deserializer.deserialize_map(BiasVisitor)
    }
}

/// A token id written as a number or as a string of digits (JSON object keys).
struct TokenKey(u32);

impl<'de> Deserialize<'de> for TokenKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;

        impl Visitor<'_> for KeyVisitor {
            type Value = TokenKey;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a token id (a whole number >= 0)")
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<TokenKey, E> {
                u32::try_from(v)
                    .map(TokenKey)
                    .map_err(|_| E::custom(format!("token id {v} is larger than {}", u32::MAX)))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<TokenKey, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::custom(format!("token id {v} is negative"))),
                }
            }

            fn visit_str<E: de::Error>(self, s: &str) -> Result<TokenKey, E> {
                s.trim()
                    .parse()
                    .map(TokenKey)
                    .map_err(|_| E::custom(format!("`{s}` is not a token id")))
            }
        }

        deserializer.deserialize_any(KeyVisitor)
    }
}
