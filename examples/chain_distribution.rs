//! The distribution samplab's sampler draws the next token from, for a peer to compare with its
//! own chain (`benches/llamacpp_chain.py`): reads `{"params": YAML, "logits": [...],
//! "history": [...]}` on stdin (the first history token is the prompt, the rest were generated)
//! and prints `[[id, p], ...]` in draw order.

use samplab::params::SamplingParams;
use samplab::sampling::{SampleState, Sampler};
use std::io::Read;

#[derive(serde::Deserialize)]
struct Input {
    params: String,
    logits: Vec<f32>,
    history: Vec<u32>,
}

fn main() -> anyhow::Result<()> {
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text)?;
    let input: Input = serde_json::from_str(&text)?;
    let params = SamplingParams::from_yaml(&input.params)?;
    let prompt = &input.history[..1.min(input.history.len())];
    let mut state = SampleState::new(0, 0, prompt, input.logits.len());
    for &id in input.history.iter().skip(1) {
        state.accept(id);
    }
    let kept = Sampler::new(&params)?.distribution(&input.logits, &state)?;
    let pairs: Vec<(u32, f32)> = kept.iter().map(|t| (t.id, t.prob)).collect();
    println!("{}", serde_json::to_string(&pairs)?);
    Ok(())
}
