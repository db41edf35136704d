//! The token ids some processors need beyond the params: bad words as token sequences, DRY's
//! breaker tokens, the model's EOS ids, and the watched tokens whose logprobs are reported.

use crate::params::{Engine, SamplingParams};
use tokenizers::Tokenizer;

#[derive(Debug, Clone, Default)]
pub struct TokenLists {
    pub eos_ids: Vec<u32>,
    /// Each bad word's token sequences: as written, and after a space where that tokenizes
    /// differently (a word inside text), as vLLM does.
    pub bad_words: Vec<Vec<u32>>,
    /// Tokens whose text contains one of `dry_sequence_breakers`, sorted.
    pub breakers: Vec<u32>,
    /// The id of each `watch` item, in its order (the engine resolves them).
    pub watched: Vec<u32>,
}

impl TokenLists {
    /// What `params` needs of `tokenizer`: the vocabulary is scanned for breakers only when DRY
    /// is on.
    pub fn new(tokenizer: &Tokenizer, eos_ids: &[u32], params: &SamplingParams) -> Self {
        let encode = |text: &str| {
            tokenizer
                .encode(text, false)
                .map(|e| e.get_ids().to_vec())
                .unwrap_or_default()
        };
        let mut bad_words = Vec::new();
        for word in params.bad_words.iter().flatten() {
            let bare = encode(word.trim_start());
            let spaced = encode(&format!(" {}", word.trim_start()));
            if spaced.len() == bare.len() && spaced.first() != bare.first() {
                bad_words.push(spaced);
            }
            bad_words.push(bare);
        }
        bad_words.retain(|w| !w.is_empty());
        let dry_on = params.engine == Engine::LlamaCpp
            && params.dry_multiplier > 0.0
            && params.dry_penalty_last_n != 0;
        let breakers = if dry_on {
            (0..tokenizer.get_vocab_size(true) as u32)
                .filter(|&id| {
                    tokenizer.decode(&[id], false).is_ok_and(|text| {
                        params
                            .dry_sequence_breakers
                            .iter()
                            .any(|b| text.contains(b.as_str()))
                    })
                })
                .collect()
        } else {
            Vec::new()
        };
        Self {
            eos_ids: eos_ids.to_vec(),
            bad_words,
            breakers,
            watched: Vec::new(),
        }
    }
}
