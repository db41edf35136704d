//! The panels of the screen (prompt, parameters, columns, inspector, status bar) and the text
//! helpers they share; each holds its own state type and renders it, never `State`.

pub mod cells;
pub mod chain_view;
pub mod columns;
pub mod disagreement;
pub mod inspector;
pub mod layout;
pub mod legend;
pub mod params;
pub mod prompt;
pub mod spark;
pub mod status;
pub mod text;
pub mod token_texts;
pub mod undo;
pub mod wrap;
