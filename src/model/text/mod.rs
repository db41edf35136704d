//! From text to token ids and back: GGUF vocabularies as llama.cpp tokenizes them, and chat
//! templates as transformers renders them.

mod bytes;
pub mod chat_template;
pub mod gguf_tokenizer;
mod piece;

pub use bytes::{PieceBytes, Specials, text_bytes};
pub use piece::{byte_fallback, token_text};

/// A BPE tokenizer without merges, for the unit tests of pieces: `vocab`, `decoder` and
/// `added` (its added tokens) as tokenizer.json writes them.
#[cfg(test)]
fn unmerged_bpe(vocab: &str, decoder: &str, added: &str) -> tokenizers::Tokenizer {
    let json = format!(
        r#"{{"version":"1.0","truncation":null,"padding":null,"added_tokens":{added},
        "normalizer":null,"pre_tokenizer":null,"post_processor":null,"decoder":{decoder},
        "model":{{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":null,
        "end_of_word_suffix":null,"fuse_unk":false,"byte_fallback":false,
        "vocab":{vocab},"merges":[]}}}}"#
    );
    std::str::FromStr::from_str(&json).unwrap()
}
