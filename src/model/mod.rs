//! Models: where they come from, how they tokenize, and the llama-family forward pass.

pub mod gguf_tokenizer;
pub mod source;
