//! The model's vocabulary as llguidance needs it: every token's bytes in a trie, special tokens
//! marked, and one EOS id standing for all of the model's.

use super::ConstraintError;
use crate::model::text::byte_fallback;
use llguidance::ParserFactory;
use llguidance::toktrie::{TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};
use std::collections::HashMap;
use std::sync::Arc;
use tokenizers::Tokenizer;

/// Built once per model (the trie and the slices llguidance precomputes take a moment over a
/// large vocabulary) and shared by every constrained run.
pub struct Vocabulary {
    pub(super) factory: ParserFactory,
    /// The model's EOS ids; the first is the one llguidance knows.
    pub(super) eos_ids: Arc<[u32]>,
}

impl std::fmt::Debug for Vocabulary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vocabulary")
            .field("eos_ids", &self.eos_ids)
            .finish_non_exhaustive()
    }
}

impl Vocabulary {
    /// `vocab_size` is the model's (its logits' length), which may exceed the tokenizer's:
    /// ids without a token are never allowed.
    pub fn new(
        tokenizer: &Tokenizer,
        eos_ids: &[u32],
        vocab_size: usize,
    ) -> Result<Self, ConstraintError> {
        let words = token_bytes(tokenizer, vocab_size);
        let info = TokRxInfo {
            vocab_size: vocab_size as u32,
            tok_eos: eos_ids
                .first()
                .copied()
                .filter(|&id| (id as usize) < vocab_size)
                .ok_or_else(|| {
                    ConstraintError::Vocabulary(
                        "the model names no EOS token, so a constraint could never end".into(),
                    )
                })?,
            tok_bos: None,
            tok_pad: None,
            tok_unk: None,
            tok_end_of_turn: None,
        };
        let env: TokEnv = Arc::new(Env {
            trie: TokTrie::from(&info, &words),
            tokenizer: tokenizer.clone(),
        });
        let mut factory = ParserFactory::new_simple(&env)
            .map_err(|e| ConstraintError::Vocabulary(e.to_string()))?;
        // llguidance logs to stderr by default, which would draw over the playground.
        factory.quiet();
        Ok(Self {
            factory,
            eos_ids: eos_ids.into(),
        })
    }
}

impl Vocabulary {
    /// The 256 bytes and an EOS: enough to check that a constraint parses, without a model.
    pub fn bytes() -> Self {
        let env = llguidance::toktrie::ApproximateTokEnv::single_byte_env();
        let eos = env.tok_trie().eos_token();
        let mut factory = ParserFactory::new_simple(&env).expect("the byte vocabulary slices");
        factory.quiet();
        Self {
            factory,
            eos_ids: [eos].into(),
        }
    }
}

/// The bytes each id stands for: byte-level BPE's pieces mapped back through its byte alphabet,
/// SentencePiece's `▁` as a space and `<0xNN>` as the byte; special tokens behind llguidance's
/// marker so that only a grammar naming them (`<|im_end|>`) allows them.
fn token_bytes(tokenizer: &Tokenizer, vocab_size: usize) -> Vec<Vec<u8>> {
    let byte_level = decodes_byte_level(tokenizer);
    // The alphabet read backwards: the byte each of its characters stands for.
    let mut byte_of = HashMap::with_capacity(256);
    for (byte, c) in byte_alphabet().into_iter().enumerate() {
        byte_of.insert(c, byte as u8);
    }
    let added = tokenizer.get_added_tokens_decoder();
    (0..vocab_size as u32)
        .map(|id| {
            if let Some(token) = added.get(&id) {
                let mut bytes = token.content.clone().into_bytes();
                if token.special {
                    bytes.insert(0, TokTrie::SPECIAL_TOKEN_MARKER);
                }
                return bytes;
            }
            let Some(piece) = tokenizer.id_to_token(id) else {
                return Vec::new();
            };
            if byte_level {
                let mapped: Option<Vec<u8>> =
                    piece.chars().map(|c| byte_of.get(&c).copied()).collect();
                return mapped.unwrap_or_else(|| piece.into_bytes());
            }
            match byte_fallback(&piece) {
                Some(byte) => vec![byte],
                None => piece.replace('\u{2581}', " ").into_bytes(),
            }
        })
        .collect()
}

/// Whether the tokenizer's decoder reads pieces through GPT-2's byte alphabet.
fn decodes_byte_level(tokenizer: &Tokenizer) -> bool {
    let Some(Ok(decoder)) = tokenizer.get_decoder().map(serde_json::to_value) else {
        return false;
    };
    decoder["type"] == "ByteLevel"
        || decoder["decoders"]
            .as_array()
            .is_some_and(|all| all.iter().any(|d| d["type"] == "ByteLevel"))
}

/// GPT-2's byte alphabet: byte b is `alphabet[b]`. Printable Latin-1 bytes stand for
/// themselves; the rest are moved, in order, to U+0100 onwards.
fn byte_alphabet() -> [char; 256] {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut alphabet = ['\0'; 256];
    let mut moved = 0x100;
    for b in 0..=255u8 {
        alphabet[b as usize] = if printable(b) {
            char::from(b)
        } else {
            moved += 1;
            char::from_u32(moved - 1).expect("U+0100..U+0143 are characters")
        };
    }
    alphabet
}

/// The trie and the tokenizer, for llguidance's lookups.
struct Env {
    trie: TokTrie,
    tokenizer: Tokenizer,
}

impl TokenizerEnv for Env {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    /// The model's own tokenization where it spells `s` back exactly, else the longest
    /// pieces first (a tokenizer may not reach every text: bytes that are not UTF-8, a
    /// vocabulary without single characters).
    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        let own = self
            .tokenizer
            .encode(String::from_utf8_lossy(s).as_ref(), false)
            .map(|e| e.get_ids().to_vec());
        match own {
            Ok(ids) if self.trie.decode_raw(&ids) == s => ids,
            _ => self.trie.greedy_tokenize(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_alphabet_is_a_bijection_that_keeps_printable_bytes() {
        let alphabet = byte_alphabet();
        let mut seen: Vec<char> = alphabet.to_vec();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 256);
        assert_eq!(alphabet[b'a' as usize], 'a');
        assert_eq!(alphabet[b' ' as usize], '\u{120}', "a space is GPT-2's Ġ");
        assert_eq!(
            alphabet[b'\n' as usize], '\u{10A}',
            "a newline is GPT-2's Ċ"
        );
    }
}
