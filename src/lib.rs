//! samplab: a terminal playground for LLM sampling.
//!
//! The modules follow the flow of a run: `params` → `sampling` → `model` → `engine`;
//! `response` is what a run returns, `presets` stores params, and `export` turns them into
//! other engines' code.

pub mod engine;
pub mod export;
pub mod model;
pub mod params;
pub mod presets;
pub mod response;
pub mod sampling;
pub mod tui;
