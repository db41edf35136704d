//! samplab: a terminal playground for LLM sampling.
//!
//! The modules follow the flow of a run: `params` → `sampling` → `model` → `engine`;
//! `response` is what a run returns, `presets` stores params (`preset_store` keeps the user's in
//! the `config` directory), and `export` turns them into other engines' code.

pub mod atomic_file;
pub mod config;
pub mod engine;
pub mod export;
mod fast_exp;
pub mod model;
pub mod params;
pub mod preset_store;
pub mod presets;
pub mod regular_file;
pub mod render;
pub mod response;
pub mod sampling;
pub mod terminal_text;
pub mod tui;
pub mod yaml_guard;
