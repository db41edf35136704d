//! One sampling step per sample on a whole vocabulary: the budget is 0.5 ms on one core at
//! 152k tokens with top_k 40, top_p 0.9 and repetition_penalty 1.1 over 512 prior tokens, and
//! for a typical llama.cpp chain (penalties over the last 64, DRY, top_k 40, top_p 0.95,
//! min_p 0.05, temperature 0.8) and vLLM with every processor on.

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use samplab::params::{Engine, LogitBias, SamplingParams};
use samplab::sampling::{SampleRng, SampleState, Sampler, TokenLists};
use std::hint::black_box;

/// Logits shaped like a language model's: a Gaussian body and a few strong candidates on top,
/// or (`peaked == false`) the body alone, a flat worst case for top_p.
fn logits(vocab: usize, peaked: bool) -> Vec<f32> {
    let mut rng = SampleRng::new(1);
    let mut logits: Vec<f32> = (0..vocab)
        .map(|_| {
            // Box-Muller.
            let (a, b) = (1.0 - rng.uniform(), rng.uniform());
            ((-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos() * 2.0) as f32
        })
        .collect();
    if peaked {
        for i in 0..30 {
            let id = (rng.uniform() * vocab as f64) as usize;
            logits[id] += 6.0 + i as f32 * 0.4;
        }
    }
    logits
}

fn params(edit: impl FnOnce(&mut SamplingParams)) -> SamplingParams {
    let mut params = SamplingParams {
        repetition_penalty: 1.1,
        ..SamplingParams::default()
    };
    edit(&mut params);
    params
}

fn bench(c: &mut Criterion) {
    let cases = [
        (
            "top_k40_top_p0.9",
            params(|p| {
                p.top_k = 40;
                p.top_p = 0.9;
            }),
        ),
        (
            "top_k40_top_p0.9_logprobs5",
            params(|p| {
                p.top_k = 40;
                p.top_p = 0.9;
                p.logprobs = Some(5);
            }),
        ),
        ("top_p0.9", params(|p| p.top_p = 0.9)),
        ("no_filter", params(|_| {})),
        ("greedy", params(|p| p.temperature = 0.0)),
        (
            "llama.cpp_chain",
            params(|p| {
                p.engine = Engine::LlamaCpp;
                p.dry_multiplier = 0.8;
                p.top_k = 40;
                p.top_p = 0.95;
                p.min_p = 0.05;
                p.temperature = 0.8;
            }),
        ),
        (
            "vllm_every_processor",
            params(|p| {
                p.top_k = 40;
                p.top_p = 0.9;
                p.min_p = 0.05;
                p.presence_penalty = 0.5;
                p.frequency_penalty = 0.5;
                p.min_tokens = 1000;
                p.logit_bias = Some(LogitBias((0..100).map(|id| (id * 7, 1.5)).collect()));
                p.bad_words = Some(vec!["x".into()]);
                p.allowed_token_ids = Some((0..50_000).collect());
            }),
        ),
        (
            "transformers_chain",
            params(|p| {
                p.engine = Engine::Transformers;
                p.top_k = 40;
                p.top_p = 0.95;
                p.min_p = 0.05;
                p.temperature = 0.8;
            }),
        ),
    ];
    // Gemma 3's 262,144 tokens, Qwen's 151,936, Llama 2's 32,000.
    for vocab in [262_144, 151_936, 32_000] {
        let mut rng = SampleRng::new(2);
        let prior: Vec<u32> = (0..512)
            .map(|_| (rng.uniform() * vocab as f64) as u32)
            .collect();
        for peaked in [true, false] {
            let logits = logits(vocab, peaked);
            let shape = if peaked { "peaked" } else { "flat" };
            for (name, params) in &cases {
                if !peaked && !name.starts_with("top_p") && !name.starts_with("no_filter") {
                    continue;
                }
                let mut sampler = Sampler::new(params)
                    .expect("bench params are valid")
                    .with_tokens(TokenLists {
                        eos_ids: vec![2],
                        bad_words: vec![vec![17, 18], vec![19]],
                        breakers: vec![13, 29],
                        watched: Vec::new(),
                    });
                let mut seed = 0;
                c.bench_function(&format!("step/{vocab}/{shape}/{name}"), |b| {
                    b.iter_batched_ref(
                        || {
                            seed += 1;
                            SampleState::new(seed, 0, &prior, vocab)
                        },
                        |state| black_box(sampler.sample(black_box(&logits), state)),
                        BatchSize::SmallInput,
                    )
                });
            }
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
