//! Trains samplab-tiny, the model samplab embeds and opens when no `--model` is given:
//! a grammar of children's stories (corpus.rs), a byte-fallback BPE tokenizer trained on it
//! (tokenizer.rs), and a small llama trained on the CPU with candle's autograd (model.rs,
//! train.rs), written in the Hugging Face layout (export.rs).
//!
//! `cargo run --release --example train_default_model -- --out models/samplab-tiny --seed 1`

mod corpus;
mod export;
mod model;
mod tokenizer;
mod train;

use candle_core::{Device, Tensor};
use clap::Parser;
use corpus::Stories;
use model::{Shape, TinyLlama};
use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Instant;
use tokenizers::Tokenizer;
use train::{Schedule, TokenStream};

/// The shape of samplab-tiny: about 0.8M parameters, a context that holds any story.
const SHAPE: Shape = Shape {
    vocab: 1024,
    hidden: 128,
    layers: 4,
    heads: 4,
    kv_heads: 2,
    ffn: 320,
    context: 256,
    rope_theta: 10_000.0,
    eps: 1e-5,
};
/// Stories never trained on, for the held-out loss.
const HELD_OUT_STORIES: usize = 400;
/// Stories the tokenizer learns its pieces from.
const TOKENIZER_STORIES: usize = 4000;
const INIT_STD: f64 = 0.02;

#[derive(Parser)]
#[command(about = "Train samplab-tiny, the model embedded in samplab")]
struct Args {
    /// Directory to write config.json, model.safetensors, tokenizer.json and
    /// generation_config.json into.
    #[arg(long)]
    out: PathBuf,
    /// Seeds the corpus, the initial weights and the batch order.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Training stories to generate.
    #[arg(long, default_value_t = 20_000)]
    stories: usize,
    /// Optimizer steps.
    #[arg(long, default_value_t = 400)]
    steps: usize,
    /// Story windows (of the 256-token context) per step.
    #[arg(long, default_value_t = 16)]
    batch: usize,
    /// Peak learning rate.
    #[arg(long, default_value_t = 5e-3)]
    lr: f64,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.steps >= 1, "--steps must be at least 1, got 0");
    anyhow::ensure!(args.batch >= 1, "--batch must be at least 1, got 0");
    anyhow::ensure!(
        args.stories >= TOKENIZER_STORIES,
        "--stories must be at least {TOKENIZER_STORIES} (the tokenizer learns from that many), got {}",
        args.stories
    );
    let device = Device::Cpu;

    let mut stories = Stories::new(args.seed);
    let held_out: Vec<String> = (0..HELD_OUT_STORIES).map(|_| stories.story()).collect();
    let unseen: HashSet<&String> = held_out.iter().collect();
    let training: Vec<String> = (0..args.stories)
        .map(|_| stories.story())
        .filter(|s| !unseen.contains(s))
        .collect();
    let tokenizer = tokenizer::train(&training[..TOKENIZER_STORIES], SHAPE.vocab)?;
    let train_data = encode(&tokenizer, &training)?;
    let held_out_data = encode(&tokenizer, &held_out)?;
    println!(
        "corpus: {} training stories ({} tokens), {} held out ({} tokens); {} words, {} pieces",
        training.len(),
        train_data.len(),
        held_out.len(),
        held_out_data.len(),
        corpus::lexicon().len(),
        SHAPE.vocab
    );

    let model = TinyLlama::new(SHAPE, args.seed, INIT_STD, &device)?;
    println!("model: {} parameters", model.parameter_count());
    let schedule = Schedule {
        steps: args.steps,
        warmup: (args.steps / 20).max(1),
        peak_lr: args.lr,
        final_lr: args.lr / 10.0,
        batch: args.batch,
        weight_decay: 0.01,
    };
    let began = Instant::now();
    train::train(
        &model,
        &train_data,
        SHAPE.context,
        &schedule,
        args.seed,
        &device,
    )?;
    let seconds = began.elapsed().as_secs_f64();
    println!(
        "trained {} tokens in {seconds:.0} s",
        args.steps * args.batch * SHAPE.context
    );

    export::write_model_dir(&args.out, &SHAPE, &model, &tokenizer)?;
    let loss = train::mean_loss(&model, &held_out_data, SHAPE.context, args.batch, &device)?;
    println!(
        "held-out loss {loss:.4} nats/token (perplexity {:.2})",
        loss.exp()
    );
    let story = tokenizer
        .encode(held_out[0].as_str(), true)
        .map_err(anyhow::Error::msg)?;
    check_inference_path(&model, &args.out, story.get_ids())?;
    println!("wrote {}", args.out.display());
    Ok(())
}

/// Each story as `BOS story EOS`.
fn encode(tokenizer: &Tokenizer, texts: &[String]) -> anyhow::Result<TokenStream> {
    let stories = texts
        .iter()
        .map(|text| {
            let encoding = tokenizer
                .encode(text.as_str(), true)
                .map_err(anyhow::Error::msg)?;
            let mut ids = encoding.get_ids().to_vec();
            ids.push(tokenizer::EOS_ID);
            Ok(ids)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(TokenStream::new(stories))
}

/// The saved directory, loaded as samplab loads any model, must give the logits of the
/// training graph.
fn check_inference_path(
    model: &TinyLlama,
    dir: &std::path::Path,
    ids: &[u32],
) -> anyhow::Result<()> {
    let device = Device::Cpu;
    let loaded = samplab::model::Model::load(dir, &device)?;
    let inferred = loaded.session().prefill(ids, true)?;
    let input = Tensor::new(ids, &device)?.unsqueeze(0)?;
    let trained = model.forward(&input)?.to_vec2::<f32>()?;
    let worst = trained
        .iter()
        .flatten()
        .zip(inferred.iter().flatten())
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    println!(
        "inference path: largest logit difference {worst:.2e} over {} positions",
        ids.len()
    );
    anyhow::ensure!(
        worst < 1e-3,
        "the inference path disagrees with training: {worst}"
    );
    Ok(())
}
