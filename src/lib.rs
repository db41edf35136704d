//! samplab: a terminal playground for LLM sampling.
//!
//! The modules follow the flow of a run: `params` → `sampling` → `model` → `engine`;
//! `response` is what a run returns and `export` turns params into other engines' code.

pub mod model;
pub mod params;
pub mod response;
