//! Decode and prefill throughput of the forward pass, without the sampler or the engine.
//!
//! `cargo run --release --example model_bench [-- model.gguf]`; without a path it writes
//! (once) and runs a random-weight SmolLM2-135M in q8_0. Thread count: RAYON_NUM_THREADS.

use candle_core::Device;
use candle_core::quantized::GgmlDType;
use samplab::model::Model;
use samplab::model::synthetic::{SMOLLM2_135M, write_synthetic_gguf};
use std::path::PathBuf;
use std::time::Instant;

fn main() -> anyhow::Result<()> {
    let path = match std::env::args().nth(1) {
        Some(path) => PathBuf::from(path),
        None => {
            let path = std::env::temp_dir().join("samplab-synthetic-smollm2-135m-q8_0.gguf");
            if !path.is_file() {
                let start = Instant::now();
                write_synthetic_gguf(&path, &SMOLLM2_135M, GgmlDType::Q8_0, 42)?;
                eprintln!("wrote {} in {:.1?}", path.display(), start.elapsed());
            }
            path
        }
    };
    let start = Instant::now();
    let model = Model::load(&path, &Device::Cpu)?;
    println!("loaded {} in {:.1?}", path.display(), start.elapsed());
    let vocab = model.config().vocab_size as u32;
    let tokens = |n: usize, salt: u32| -> Vec<u32> {
        (0..n as u32)
            .map(|i| (i * 7919 + salt * 104_729) % vocab)
            .collect()
    };

    let prompt = tokens(512, 1);
    let mut session = model.session();
    let start = Instant::now();
    session.prefill(&prompt, false)?;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "prefill 512: {:.1} ms, {:.0} tok/s",
        secs * 1e3,
        512.0 / secs
    );

    for rows in [1usize, 8] {
        let steps = 64;
        let mut session = model.session();
        session.prefill(&tokens(16, 2), false)?;
        session.fork(rows)?;
        // One warm-up step: first-touch allocations and kernel repacking.
        session.decode_step(&tokens(rows, 3))?;
        let start = Instant::now();
        for step in 0..steps {
            session.decode_step(&tokens(rows, 4 + step))?;
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "decode N={rows}: {:.2} ms/step, {:.1} tok/s aggregate ({:.1} per row)",
            secs * 1e3 / steps as f64,
            (rows * steps as usize) as f64 / secs,
            steps as f64 / secs,
        );
    }
    Ok(())
}
