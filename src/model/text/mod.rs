//! From text to token ids and back: GGUF vocabularies as llama.cpp tokenizes them, and chat
//! templates as transformers renders them.

mod bytes;
pub mod chat_template;
pub mod gguf_tokenizer;
mod piece;

pub use bytes::{PieceBytes, Specials, text_bytes};
pub use piece::{byte_fallback, token_text};
