//! Input: the key map, mouse events turned into actions and screen targets, and the signals that
//! end the playground.

pub mod keymap;
pub mod mouse;
#[cfg(unix)]
pub mod signals;
