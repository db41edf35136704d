//! Candle models: the llama-family forward, weight loading and tokenizers.

pub mod gguf_tokenizer;
