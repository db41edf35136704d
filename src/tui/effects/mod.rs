//! Effects: the file, clipboard and discovery work that `update` asks for and the loop performs,
//! answering with outcomes.

pub mod clipboard;
pub mod perform;
pub mod results_file;
