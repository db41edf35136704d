//! The model's vocabulary as llguidance needs it: every token's bytes in a trie, special tokens
//! marked, and one EOS id standing for all of the model's.

use super::ConstraintError;
use crate::model::text::PieceBytes;
use llguidance::ParserFactory;
use llguidance::toktrie::{TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};
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

/// The bytes each id stands for (see [`PieceBytes`]); special tokens behind llguidance's
/// marker so that only a grammar naming them (`<|im_end|>`) allows them.
fn token_bytes(tokenizer: &Tokenizer, vocab_size: usize) -> Vec<Vec<u8>> {
    let pieces = PieceBytes::new(tokenizer);
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
            pieces.of(tokenizer, id).unwrap_or_default()
        })
        .collect()
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
