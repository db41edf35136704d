//! `samplab bench`: prefill and batched decode speed of a model, and the bandwidth it implies.

use super::bench_rerun::{self, RerunArgs, RunShape};
use super::progress::LoadBar;
use clap::Args;
use samplab::engine::load::{load_model_with, synthetic_model};
use samplab::engine::{Backend, BackendKind, LoadedModel, RowSource};
use samplab::model::device::DeviceChoice;
use samplab::model::source::HubSettings;
use samplab::model::source::hub::progress;
use samplab::model::source::synthetic::SYNTHETIC_SPECS;
use samplab::model::{Activations, bandwidth};
use samplab::response::provenance::Kernel;
use samplab::sampling::{log_normalizer, logprob_of};
use serde::Serialize;
use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Instant;

/// The shapes `--synthetic` knows, which its help lists.
fn synthetic_names() -> clap::builder::PossibleValuesParser {
    SYNTHETIC_SPECS
        .iter()
        .map(|s| s.name)
        .collect::<Vec<_>>()
        .into()
}

#[derive(Args)]
pub struct BenchArgs {
    /// A .gguf file, a Hugging Face model directory, or a Hub id.
    #[arg(
        long,
        required_unless_present = "synthetic",
        conflicts_with = "synthetic"
    )]
    model: Option<String>,
    /// Benchmark a random-weight model with a known model's shapes (written once into the cache
    /// directory).
    #[arg(long, value_parser = synthetic_names())]
    synthetic: Option<String>,
    /// Weight type of the synthetic model: f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_k,
    /// q3_k, q4_k, q5_k, q6_k, q4_k_m (Q4_K with Q6_K for the output and ffn_down, as
    /// llama.cpp's Q4_K_M), or mxfp4_moe (experts in MXFP4, the rest in Q8_0, as llama.cpp's
    /// MXFP4_MOE; for shapes with experts).
    #[arg(long, default_value = "q8_0", requires = "synthetic")]
    qtype: String,
    /// Where the model runs: cpu, cuda, cuda:N or metal (default: the first GPU this build
    /// supports and the machine has, else the CPU).
    #[arg(long, value_name = "DEVICE", default_value = "auto")]
    device: DeviceChoice,
    #[command(flatten)]
    precision: super::ActivationsArg,
    #[command(flatten)]
    backend: super::BackendArg,
    /// Batch sizes to decode, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4,8")]
    samples: Vec<usize>,
    /// Tokens decoded per sample at each batch size.
    #[arg(long, default_value_t = 128)]
    tokens: usize,
    /// Prompt tokens for the prefill measurement.
    #[arg(long, default_value_t = 512)]
    prompt_tokens: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    rerun: RerunArgs,
}

#[derive(Serialize)]
struct Report {
    model: String,
    device: String,
    /// Whose forward pass was timed: samplab's engine or llama.cpp.
    backend: BackendKind,
    weight_bytes: u64,
    /// Each weight type and the matrix product that ran it.
    kernels: Vec<Kernel>,
    prefill_tokens: usize,
    prefill_tok_per_s: f64,
    /// The machine's read bandwidth on the kernels' threads (CPU runs only): what a decode
    /// step that reads every weight once cannot pass.
    read_gb_per_s: Option<f64>,
    /// The CPU's largest cache (Linux): weights no larger can stay in it between decode
    /// steps, which then read them faster than `read_gb_per_s`.
    last_level_cache_bytes: Option<u64>,
    decode: Vec<DecodeRow>,
    /// Where the products round activations (`--activations 16bit`, or `auto` on a CPU that
    /// has it): how far that moves the logprobs from f32 activations.
    error_against_exact: Option<ErrorRow>,
}

#[derive(Serialize)]
struct ErrorRow {
    /// Prompt tokens scored by both.
    tokens: usize,
    /// Mean |logprob - logprob with f32 activations|, in nats.
    mean_abs_logprob: f64,
}

#[derive(Serialize)]
struct DecodeRow {
    samples: usize,
    tok_per_s: f64,
    aggregate_tok_per_s: f64,
    /// Weight bytes read per batched step times steps per second.
    weight_gb_per_s: f64,
    /// `weight_gb_per_s` as a share of `read_gb_per_s`.
    of_read_limit: Option<f64>,
}

pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    if args.samples.iter().any(|&n| n == 0 || n > 64) || args.samples.is_empty() {
        anyhow::bail!("--samples takes batch sizes in 1..=64, e.g. 1,4,8");
    }
    if args.tokens == 0 || args.prompt_tokens == 0 {
        anyhow::bail!("--tokens and --prompt-tokens must be at least 1");
    }
    let activations = args.precision.activations;
    // Before minutes of writing a synthetic file, a precision the CPU lacks is refused.
    activations.check()?;
    let mut model = load(&args, activations, Steps::Shown)?;
    if !args.rerun.reruns.is_empty() {
        let shape = RunShape {
            samples: args.samples[0],
            tokens: args.tokens,
            prompt_tokens: args.prompt_tokens,
            json: args.json,
        };
        return bench_rerun::run(&mut model, &args.rerun, shape);
    }
    let mut report = measure(&mut model, &args)?;
    // Only where the products round: a GPU, float weights and `exact` have nothing to measure.
    if model.activations == Some(Activations::SixteenBit) {
        report.error_against_exact = Some(error_against_exact(model, &args)?);
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        print_table(&mut out, &report)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether a load shows its steps on stderr.
#[derive(Clone, Copy, PartialEq)]
enum Steps {
    Shown,
    /// The exact reference loads the file the bench just loaded: its steps would repeat.
    Hidden,
}

/// The model `args` name, its quantized CPU products multiplying `activations`.
fn load(args: &BenchArgs, activations: Activations, steps: Steps) -> anyhow::Result<LoadedModel> {
    let backend = args.backend.backend.for_model(0);
    args.backend.apply_verbose();
    match (&args.model, &args.synthetic) {
        (Some(spec), _) => {
            let mut bar = LoadBar::new();
            let hub = HubSettings::from_env();
            let model =
                load_model_with(spec, &hub, args.device, activations, backend, &mut |step| {
                    if steps == Steps::Shown {
                        bar.show(&step)
                    }
                });
            bar.clear();
            model
        }
        (None, Some(name)) => synthetic_model(
            name,
            &args.qtype,
            args.device,
            activations,
            backend,
            &mut |step| {
                if steps == Steps::Shown {
                    eprintln!("{}", step.message)
                }
            },
        ),
        (None, None) => unreachable!("clap requires --model or --synthetic"),
    }
}

/// The prompt tokens the error against the exact model is measured over.
const ERROR_TOKENS: usize = 64;

/// Mean |logprob - exact| of each of the bench prompt's first tokens given the ones before,
/// between `model` and the same file with f32 activations (loaded once `model` is dropped,
/// so that the two never share memory).
fn error_against_exact(mut model: LoadedModel, args: &BenchArgs) -> anyhow::Result<ErrorRow> {
    let prompt = bench_prompt(model.backend.as_ref(), args.prompt_tokens, args.tokens);
    let prompt = &prompt[..prompt.len().min(ERROR_TOKENS)];
    let ours = prompt_logprobs(&mut model, prompt)?;
    drop(model);
    let mut exact = load(args, Activations::Exact, Steps::Hidden)?;
    let exact = prompt_logprobs(&mut exact, prompt)?;
    let total: f64 = ours.iter().zip(&exact).map(|(a, b)| (a - b).abs()).sum();
    Ok(ErrorRow {
        tokens: ours.len(),
        mean_abs_logprob: total / ours.len().max(1) as f64,
    })
}

/// Each prompt token's logprob given the ones before it, from the second token on.
fn prompt_logprobs(model: &mut LoadedModel, prompt: &[u32]) -> anyhow::Result<Vec<f64>> {
    let backend = model.backend.as_mut();
    backend.reset();
    let logits = backend.prefill(prompt, 0)?.logits;
    backend.reset();
    logits
        .iter()
        .zip(&prompt[1..])
        .map(|(logits, &next)| {
            let log_norm = log_normalizer(logits)?.log_norm;
            Ok(f64::from(logprob_of(logits, log_norm, next)))
        })
        .collect()
}

fn measure(model: &mut LoadedModel, args: &BenchArgs) -> anyhow::Result<Report> {
    let backend = model.backend.as_mut();
    let prompt = bench_prompt(backend, args.prompt_tokens, args.tokens);
    let prompt_tokens = prompt.len();

    // A different first token, so that the timed prefill reuses nothing of the warm-up's.
    let warm_up: Vec<u32> = prompt[..prompt_tokens.min(8)]
        .iter()
        .map(|&t| t ^ 1)
        .collect();
    backend.prefill(&warm_up, warm_up.len() - 1)?;
    backend.reset();
    let start = Instant::now();
    backend.prefill(&prompt, prompt_tokens - 1)?;
    let prefill_tok_per_s = prompt_tokens as f64 / start.elapsed().as_secs_f64();

    let weight_bytes = backend.weight_bytes();
    let read_gb_per_s = (model.device == "cpu").then(bandwidth::read_gb_per_s);
    let last_level_cache_bytes = (model.device == "cpu")
        .then(bandwidth::last_level_cache_bytes)
        .flatten();
    let vocab = backend.vocab_size() as u32;
    let mut decode = Vec::new();
    for &samples in &args.samples {
        backend.reset();
        backend.prefill(&prompt[..1], 1)?;
        backend.join((0..samples).map(|_| RowSource::prompt()).collect(), 1)?;
        let tokens: Vec<u32> = (0..samples as u32).map(|i| (i * 31 + 7) % vocab).collect();
        backend.decode(&tokens)?;
        let start = Instant::now();
        for _ in 0..args.tokens {
            backend.decode(&tokens)?;
        }
        let seconds = start.elapsed().as_secs_f64();
        let steps_per_s = args.tokens as f64 / seconds;
        let weight_gb_per_s = steps_per_s * weight_bytes as f64 / 1e9;
        decode.push(DecodeRow {
            samples,
            tok_per_s: steps_per_s,
            aggregate_tok_per_s: steps_per_s * samples as f64,
            weight_gb_per_s,
            of_read_limit: read_gb_per_s.map(|limit| weight_gb_per_s / limit),
        });
    }
    backend.reset();
    Ok(Report {
        model: model.name.clone(),
        device: model.device.clone(),
        backend: backend.kind(),
        weight_bytes,
        kernels: backend.kernels().into_iter().map(Kernel::from).collect(),
        prefill_tokens: prompt_tokens,
        prefill_tok_per_s,
        read_gb_per_s,
        last_level_cache_bytes,
        decode,
        error_against_exact: None,
    })
}

/// `tokens` ids spread over the vocabulary (their values do not change the work done), fewer
/// where the context must leave room for `room` more.
fn bench_prompt(backend: &dyn Backend, tokens: usize, room: usize) -> Vec<u32> {
    let vocab = backend.vocab_size() as u32;
    let fits = backend.context_length().saturating_sub(room + 1);
    (0..tokens.min(fits).max(1) as u32)
        .map(|i| (i * 7919 + 1) % vocab)
        .collect()
}

fn print_table(out: &mut impl Write, report: &Report) -> io::Result<()> {
    writeln!(
        out,
        "model {} on {} ({}) · weights {:.1} MB",
        report.model,
        report.device,
        report.backend,
        report.weight_bytes as f64 / 1e6
    )?;
    for row in &report.kernels {
        writeln!(out, "{:<7}  {}", row.weight_type, row.kernel)?;
    }
    writeln!(
        out,
        "prefill  {} tokens: {:.1} tok/s",
        report.prefill_tokens, report.prefill_tok_per_s
    )?;
    if let Some(limit) = report.read_gb_per_s {
        writeln!(
            out,
            "memory   {limit:.1} GB/s read (the decode limit below is its share)"
        )?;
    }
    if let Some(cache) = report.last_level_cache_bytes {
        let fits = if report.weight_bytes <= cache {
            "holds these weights: a decode step can read them faster than the limit"
        } else {
            "is smaller than these weights"
        };
        writeln!(out, "cache    {} last level {fits}", progress::bytes(cache))?;
    }
    writeln!(
        out,
        "samples  tok/s/sample  aggregate tok/s  weights GB/s  of limit"
    )?;
    for row in &report.decode {
        let share = row
            .of_read_limit
            .map_or_else(|| "-".to_owned(), |s| format!("{:.0}%", 100.0 * s));
        writeln!(
            out,
            "{:>7}  {:>12.1}  {:>15.1}  {:>12.2}  {share:>8}",
            row.samples, row.tok_per_s, row.aggregate_tok_per_s, row.weight_gb_per_s
        )?;
    }
    if let Some(error) = &report.error_against_exact {
        writeln!(
            out,
            "error    mean |logprob - exact| {:.5} nats over {} prompt tokens (--activations exact: 0)",
            error.mean_abs_logprob, error.tokens
        )?;
    }
    Ok(())
}
