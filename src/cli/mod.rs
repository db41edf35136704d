//! One module per subcommand; each parses its flags and reports errors as text for the user.

pub mod bench;
mod bench_rerun;
pub mod export;
pub mod play;
pub mod presets;
mod progress;
pub mod sample;
