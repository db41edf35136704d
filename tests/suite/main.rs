//! The integration tests, linked into one binary: every test binary links candle, tokenizers and
//! the whole crate, so one binary instead of one per file saves gigabytes of disk and minutes of linking.

mod common;

mod chat_scoring;
mod chat_template;
mod chat_template_choice;
mod cli;
mod cli_first_use;
mod compare;
mod cross_vocabulary;
mod default_model;
mod detokenizer;
mod disagreement;
mod edit_continue;
mod engine;
mod engine_stories;
mod engines;
mod export;
mod export_chat;
mod export_snapshots;
mod fuzz;
mod gguf_tokenizer;
mod hub;
#[cfg(feature = "llama-cpp")]
mod llama_cpp_backend;
#[cfg(feature = "llama-cpp")]
mod llama_fixtures;
mod model_architectures;
mod model_discover;
mod model_errors;
mod model_families;
mod model_gemma;
mod model_gemma4;
mod model_harmony;
mod model_memory;
mod model_qtypes;
mod model_qwen35;
mod model_real;
mod model_stories;
mod modelscope;
mod provenance;
mod remote;
mod render;
mod replay;
mod sampling;
mod stop_strings;
mod structured;
mod tui;
mod tui_branches;
mod tui_chat;
mod tui_compare;
mod tui_dialogs;
mod tui_failures;
mod tui_inspect;
mod tui_results;
mod tui_session;
mod tui_stats;
mod tui_sweep;
mod tui_tmux;
mod twinkle;
