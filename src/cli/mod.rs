//! One module per subcommand; each parses its flags and reports errors as text for the user.

pub mod bench;
mod bench_rerun;
pub mod export;
pub mod play;
pub mod presets;
mod progress;
pub mod sample;
pub mod sweep;

/// `--activations`, for every command that loads a model.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct ActivationsArg {
    /// What quantized matrices on the CPU do with activations: exact keeps them f32 (the
    /// exact model's logits, up to summation order); 16bit rounds them to 16 bits, on CPUs
    /// with AVX-512 VNNI: faster, about 0.001 nats from exact.
    #[arg(long, value_name = "PRECISION", default_value = "exact")]
    pub activations: samplab::model::Activations,
}
