//! The per-step pipeline of design.md §2: from a sampled token id to text and a stop decision.

pub mod detokenizer;
pub mod stop;
