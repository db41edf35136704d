//! One module per subcommand; each parses its flags and reports errors as text for the user.

pub mod bench;
mod bench_rerun;
pub mod export;
pub mod play;
pub mod presets;
mod progress;
mod prompt_input;
pub mod render;
pub mod replay;
pub mod sample;
pub mod sweep;

/// `--backend`, for every command that loads a model.
#[derive(clap::Args, Debug, Clone)]
pub struct BackendArg {
    /// Which backend runs the model: samplab (samplab's exact engine), llama.cpp (every
    /// architecture llama.cpp runs; a build with `--features llama-cpp`), or auto: samplab's
    /// engine where it runs the architecture, else llama.cpp, with a notice. A comma-separated
    /// list gives one per --model (`--backend samplab,llama.cpp`).
    #[arg(long, value_name = "BACKEND", default_value = "auto")]
    pub backend: samplab::engine::Backends,
    /// Print llama.cpp's whole log on stderr (its warnings are shown in any case).
    #[arg(long)]
    pub verbose: bool,
}

impl BackendArg {
    /// What `--verbose` asks of a command that writes to a terminal's lines, not a screen.
    pub fn apply_verbose(&self) {
        samplab::engine::llama_cpp::echo_log(self.verbose);
    }
}

/// `--chat-template`, for every command that takes `--chat`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ChatTemplateArg {
    /// The chat template conversations are rendered with instead of the model's default: a
    /// Jinja file, or the name of one of the model's named templates (GGUF
    /// `tokenizer.chat_template.NAME`, tokenizer_config.json's list). Implies --chat.
    #[arg(long = "chat-template", value_name = "FILE|NAME")]
    pub chat_template: Option<String>,
}

impl ChatTemplateArg {
    pub fn choice(&self) -> Option<&str> {
        self.chat_template.as_deref()
    }
}

/// `--activations`, for every command that loads a model.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct ActivationsArg {
    /// What quantized matrices on the CPU do with activations: 16bit rounds them to 16 bits,
    /// on CPUs with AVX-512 VNNI (about 0.001 nats per token from exact, up to twice as fast);
    /// exact keeps them f32 (the exact model's logits, up to summation order); auto takes
    /// 16bit where the CPU has it, else exact.
    #[arg(long, value_name = "PRECISION", default_value = "auto")]
    pub activations: samplab::model::Activations,
}

/// `1 sample`, `3 samples`.
pub(crate) fn counted(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
