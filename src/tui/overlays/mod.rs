//! The popups drawn over the panels (help, messages, pickers, dialogs): each holds its own state
//! type and renders it from plain data, never `State`.

pub mod conversation;
pub mod export_dialog;
pub mod help;
pub mod messages;
pub mod model_picker;
pub mod popup;
pub mod preset_picker;
pub mod sample_editor;
pub mod save_prompt;
pub mod stats;
pub mod sweep_dialog;
pub mod sweep_grid;
