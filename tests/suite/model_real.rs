//! The real SmolLM2-135M-Instruct Q4_1 file against the exact model (its weights dequantized
//! to f32, run by llama.cpp: `exact` in reference.json) and against llama.cpp on the same
//! file (`q4_1`). By default our kernels multiply f32 activations with the exact dequantized
//! weights, so only summation order separates us from `exact`; `--activations 16bit` adds
//! its rounding to 16 bits.

use crate::common::{self, argmax, floats, ids, log_softmax};

use candle_core::Device;
use samplab::model::{Activations, Model};

struct Case {
    prompt: Vec<u32>,
    exact: serde_json::Value,
    llama_cpp: serde_json::Value,
}

fn setup() -> Option<(Model, Vec<Case>)> {
    setup_with(Activations::Exact)
}

/// The model with `activations`, or `None` (said) where the model or the CPU is missing.
fn setup_with(activations: Activations) -> Option<(Model, Vec<Case>)> {
    let path = common::real_model()?;
    if let Err(e) = activations.check() {
        eprintln!("skipped: {e}");
        return None;
    }
    let text = std::fs::read_to_string(path.with_file_name("reference.json"))
        .expect("reference.json lies beside the real model");
    let reference: serde_json::Value = serde_json::from_str(&text).expect("reference.json is JSON");
    let cases = reference["prompts"]
        .as_object()
        .expect("prompts by text")
        .values()
        .map(|case| Case {
            prompt: ids(&case["prompt_tokens"]),
            exact: case["exact"].clone(),
            llama_cpp: case["q4_1"].clone(),
        })
        .collect();
    Some((
        Model::load_with_activations(&path, &Device::Cpu, activations)
            .expect("the real model loads"),
        cases,
    ))
}

/// Mean |prompt logprob - exact| over every prompt token of every case, with f32
/// activations and with 16-bit ones.
#[test]
fn prompt_logprobs_are_no_further_from_the_exact_model_than_llama_cpps() {
    for activations in [Activations::Exact, Activations::SixteenBit] {
        if let Some((model, cases)) = setup_with(activations) {
            mean_error_is_no_worse_than_llama_cpps(&model, &cases, activations);
        }
    }
}

fn mean_error_is_no_worse_than_llama_cpps(model: &Model, cases: &[Case], activations: Activations) {
    let (mut ours, mut theirs, mut count) = (0.0, 0.0, 0);
    for case in cases {
        let logits = model.session().prefill(&case.prompt, true).unwrap();
        let exact = floats(&case.exact["prompt_logprobs"]);
        let llama_cpp = floats(&case.llama_cpp["prompt_logprobs"]);
        for i in 1..case.prompt.len() {
            let lp = f64::from(log_softmax(&logits[i - 1])[case.prompt[i] as usize]);
            let exact = exact[i].expect("a logprob");
            ours += (lp - exact).abs();
            theirs += (llama_cpp[i].expect("a logprob") - exact).abs();
            count += 1;
        }
    }
    let (ours, theirs) = (ours / count as f64, theirs / count as f64);
    eprintln!(
        "mean |prompt logprob - exact| over {count} tokens: samplab ({activations} activations) {ours:.5}, llama.cpp {theirs:.5}"
    );
    assert!(ours <= theirs, "samplab {ours} vs llama.cpp {theirs}");
}

/// Greedy decoding follows the exact model's tokens, which llama.cpp's 8-bit activations
/// leave within a few dozen tokens.
#[test]
fn greedy_tokens_follow_the_exact_model() {
    let Some((model, cases)) = setup() else {
        return;
    };
    for case in &cases {
        let expected = ids(&case.exact["greedy_tokens"]);
        let mut session = model.session();
        let mut logits = session.prefill(&case.prompt, false).unwrap().remove(0);
        for (step, &want) in expected.iter().enumerate() {
            let token = argmax(&logits);
            assert_eq!(token, want, "step {step}");
            logits = session.decode_step(&[token]).unwrap().remove(0);
        }
    }
}

/// N greedy samples decoded in one batch pick the same tokens as N single runs, with f32
/// activations and with 16-bit ones.
#[test]
fn batched_greedy_rows_equal_single_runs() {
    for activations in [Activations::Exact, Activations::SixteenBit] {
        if let Some((model, cases)) = setup_with(activations) {
            batched_rows_equal_single_runs(&model, &cases);
        }
    }
}

fn batched_rows_equal_single_runs(model: &Model, cases: &[Case]) {
    let prompt = &cases[0].prompt;
    let starts = [28u32, 284, 1165];
    let steps = 12;
    let single = |start: u32| {
        let mut session = model.session();
        session.prefill(prompt, false).unwrap();
        let mut tokens = vec![start];
        for _ in 0..steps {
            let logits = session.decode_step(&[*tokens.last().unwrap()]).unwrap();
            tokens.push(argmax(&logits[0]));
        }
        tokens
    };
    let expected: Vec<Vec<u32>> = starts.iter().map(|&s| single(s)).collect();
    let mut session = model.session();
    session.prefill(prompt, false).unwrap();
    session.fork(starts.len()).unwrap();
    let mut rows: Vec<Vec<u32>> = starts.iter().map(|&s| vec![s]).collect();
    for _ in 0..steps {
        let last: Vec<u32> = rows.iter().map(|r| *r.last().unwrap()).collect();
        let logits = session.decode_step(&last).unwrap();
        for (row, logits) in rows.iter_mut().zip(&logits) {
            row.push(argmax(logits));
        }
    }
    assert_eq!(rows, expected);
}
