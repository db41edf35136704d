//! The `samplab` command line.

mod cli;

use clap::{Parser, Subcommand};
use samplab::terminal_text::escape_controls;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "samplab",
    version,
    about = "A terminal playground for LLM sampling"
)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Without a subcommand: open the playground.
    #[command(flatten)]
    play: cli::play::PlayArgs,
}

/// candle asks for its thread count on every f32 matmul (attention) and, unless
/// `RAYON_NUM_THREADS` is set, counts physical cores by reading /proc/cpuinfo each time:
/// 8% of a decode step on a small model. Setting it once to rayon's own default (the
/// logical CPUs) keeps every pool's size and skips the reads.
fn pin_thread_count() {
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        // SAFETY: called first in `main`, before any other thread exists.
        unsafe { std::env::set_var("RAYON_NUM_THREADS", threads.to_string()) };
    }
}

#[derive(Subcommand)]
enum Command {
    /// Sample a prompt once and print the samples, a SampleResponse (--json) or events (--jsonl).
    Sample(cli::sample::SampleArgs),
    /// Run one prompt under every cell of a parameter grid with the same seeds, and report
    /// each cell's statistics (diversity, lengths, stop reasons, mean logprob).
    Sweep(cli::sweep::SweepArgs),
    /// Measure prefill and batched decode speed.
    Bench(cli::bench::BenchArgs),
    /// Write the parameters of a preset as code for another engine.
    Export(cli::export::ExportArgs),
    /// Turn a results file (`sample --json`, the playground's `w`) into a page to share.
    Render(cli::render::RenderArgs),
    /// Run a results file again (its prompt, params, seeds, model, device) and say whether
    /// every token equals: exit 0 if so, 1 naming the first that differs, 2 when the file
    /// cannot be replayed.
    Replay(cli::replay::ReplayArgs),
    /// Load a GGUF file with llama.cpp and run one token, in the child process that keeps a
    /// file llama.cpp aborts on away from samplab's own process (internal).
    #[command(name = "llama-probe", hide = true)]
    LlamaProbe { file: std::path::PathBuf },
    /// Check and list presets.
    Presets {
        #[command(subcommand)]
        command: cli::presets::PresetsCommand,
    },
}

fn main() -> ExitCode {
    pin_thread_count();
    // Files go to llama.cpp only after this binary has loaded them in a child process.
    if std::env::var_os(samplab::engine::llama_cpp::PROBE_VAR).is_none()
        && let Ok(exe) = std::env::current_exe()
    {
        // SAFETY: no other thread runs yet.
        unsafe { std::env::set_var(samplab::engine::llama_cpp::PROBE_VAR, exe) };
    }
    let cli = Cli::parse();
    let failure = match cli.command {
        Some(Command::Replay(_)) => ExitCode::from(cli::replay::TROUBLE),
        _ => ExitCode::FAILURE,
    };
    let result = match cli.command {
        None => cli::play::run(cli.play),
        Some(Command::Sample(args)) => cli::sample::run(args),
        Some(Command::Sweep(args)) => cli::sweep::run(args),
        Some(Command::Bench(args)) => cli::bench::run(args),
        Some(Command::Export(args)) => cli::export::run(args),
        Some(Command::Render(args)) => cli::render::run(args),
        Some(Command::Replay(args)) => cli::replay::run(args),
        Some(Command::Presets { command }) => cli::presets::run(command),
        Some(Command::LlamaProbe { file }) => {
            samplab::engine::llama_cpp::run_probe(&file).map(|()| ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        // A reader that stopped early (`samplab sample ... | head`) is no failure: end quietly,
        // as Unix tools do.
        Err(e) if closed_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // Messages quote files (a GGUF's architecture, a preset's key), which must not
            // reach the terminal as escape sequences.
            eprintln!("samplab: {}", escape_controls(&format!("{e:#}")));
            failure
        }
    }
}

/// Whether `e` comes from writing to a pipe whose reader has gone.
fn closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
