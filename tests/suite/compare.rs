//! Several models on one prompt (`samplab sample --model A --model B`): each model's result is
//! its single-model result, and cross-scores agree with a separate scoring pass.

use crate::common;

use samplab::model::source::synthetic::write_synthetic_gguf;
use samplab::response::{SampleResponse, Trajectory};
use std::path::Path;
use std::process::Command;

const PROMPT: &str = "Once upon a time";

fn sample(models: &[&Path], prompt: &str, sets: &[&str]) -> Vec<SampleResponse> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_samplab"));
    command.arg("sample").args(["--prompt", prompt, "--json"]);
    for model in models {
        command.arg("--model").arg(model);
    }
    for set in sets {
        command.args(["--set", set]);
    }
    let out = command.output().expect("the samplab binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    if models.len() == 1 {
        vec![serde_json::from_slice(&out.stdout).unwrap()]
    } else {
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

/// What a trajectory is, without how other models judged it.
fn own(t: &Trajectory) -> (Vec<u32>, &str, Vec<f32>) {
    (t.token_ids.clone(), &t.text, t.logprobs.clone())
}

#[test]
fn two_models_give_their_single_results_and_cross_scores_match_a_scoring_pass() {
    let Some(stories) = common::test_model() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let tiny = dir.path().join("tiny.gguf");
    write_synthetic_gguf(
        &tiny,
        &common::TINY_LLAMA,
        candle_core::quantized::GgmlDType::F32,
        7,
    )
    .unwrap();
    let sets = [
        "num_samples=2",
        "max_tokens=12",
        "seed=5",
        "temperature=0.9",
    ];

    let both = sample(&[&stories, &tiny], PROMPT, &sets);
    assert_eq!(both.len(), 2, "one response per model, in --model order");
    assert_eq!(both[0].model, "stories260K");
    assert_eq!(both[1].model, "tiny");
    for (response, model) in both.iter().zip([&stories, &tiny]) {
        let alone = &sample(&[model], PROMPT, &sets)[0];
        assert_eq!(response.prompt_token_ids, alone.prompt_token_ids);
        for (compared, single) in response.trajectories.iter().zip(&alone.trajectories) {
            assert_eq!(own(compared), own(single), "{}", response.model);
            assert!(single.cross_scores.is_none());
        }
    }

    // stories260K's samples under tiny: another vocabulary, so the text is tokenized again.
    scored_as_a_scoring_pass(&both[0], &tiny, "tiny", PROMPT);
}

/// Each of `response`'s samples carries one cross-score, by `scorer` (another vocabulary),
/// equal to a separate pass that scores prompt + sample as a prompt, from where it leaves the
/// prompt's own tokens.
fn scored_as_a_scoring_pass(response: &SampleResponse, scorer: &Path, name: &str, prompt: &str) {
    let prompt_ids = &sample(&[scorer], prompt, &["max_tokens=1"])[0].prompt_token_ids;
    for trajectory in &response.trajectories {
        let scores = trajectory.cross_scores.as_ref().expect("scored");
        let [score] = &scores[..] else {
            panic!("one other model: {scores:?}")
        };
        assert_eq!(score.model, name);
        assert!(score.retokenized);
        let text = format!("{prompt}{}", trajectory.text);
        let pass = &sample(&[scorer], &text, &["max_tokens=1", "prompt_logprobs=0"])[0];
        let start = pass
            .prompt_token_ids
            .iter()
            .zip(prompt_ids)
            .take_while(|(a, b)| a == b)
            .count();
        let logprobs = pass.prompt_logprobs.as_ref().unwrap();
        let scored: Vec<f64> = logprobs[start..]
            .iter()
            .map(|l| f64::from(l.unwrap()))
            .collect();
        assert_eq!(score.tokens, scored.len());
        let mean = scored.iter().sum::<f64>() / scored.len() as f64;
        assert!(
            (score.mean_logprob - mean).abs() < 1e-4,
            "cross-score {} vs scoring pass {mean}",
            score.mean_logprob
        );
        assert!((score.perplexity - (-mean).exp()).abs() < 1e-3 * score.perplexity);
    }
}

/// Gemma 3 (262,144 tokens) beside SmolLM2 (49,152): each scores the other's samples.
#[test]
fn gemma3_and_smollm2_score_each_others_samples() {
    let (Some(smollm), Some(gemma)) = (common::real_model(), common::gemma_model()) else {
        return;
    };
    let sets = ["num_samples=2", "max_tokens=8", "seed=3"];
    let prompt = "The capital of France is";
    let both = sample(&[&smollm, &gemma], prompt, &sets);
    let names: Vec<&str> = both.iter().map(|r| r.model.as_str()).collect();
    scored_as_a_scoring_pass(&both[0], &gemma, names[1], prompt);
    scored_as_a_scoring_pass(&both[1], &smollm, names[0], prompt);
}

#[test]
fn twin_models_share_a_random_seed_and_teacher_force_each_others_tokens() {
    let Some(stories) = common::test_model() else {
        return;
    };
    let both = sample(
        &[&stories, &stories],
        PROMPT,
        &["num_samples=3", "max_tokens=16"],
    );
    for (a, b) in both[0].trajectories.iter().zip(&both[1].trajectories) {
        assert_eq!(
            a.seed, b.seed,
            "compared models share seeds, also random ones"
        );
        assert_eq!(a.token_ids, b.token_ids);
    }
    for trajectory in &both[0].trajectories {
        let score = &trajectory.cross_scores.as_ref().unwrap()[0];
        assert!(!score.retokenized, "the same vocabulary shares token ids");
        assert_eq!(score.tokens, trajectory.token_ids.len());
        let own_mean = common::mean_logprob(&trajectory.logprobs);
        assert!(
            (score.mean_logprob - own_mean).abs() < 1e-3,
            "teacher-forced {} vs sampled {own_mean}",
            score.mean_logprob
        );
    }
}

#[test]
fn a_bad_second_model_fails_before_the_first_one_runs() {
    let Some(stories) = common::test_model() else {
        return;
    };
    let out = Command::new(env!("CARGO_BIN_EXE_samplab"))
        .args(["sample", "--jsonl", "--prompt", PROMPT, "--model"])
        .arg(&stories)
        .args(["--model", "/nonexistent/second.gguf"])
        .output()
        .expect("the samplab binary runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("second.gguf"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(r#""event":"loaded""#),
        "the first model loads: {stdout}"
    );
    assert!(
        !stdout.contains(r#""event":"token""#),
        "but nothing runs: {stdout}"
    );
}

#[test]
fn every_jsonl_line_of_two_models_names_its_model() {
    let Some(stories) = common::test_model() else {
        return;
    };
    let out = Command::new(env!("CARGO_BIN_EXE_samplab"))
        .args(["sample", "--jsonl", "--prompt", PROMPT, "--model"])
        .arg(&stories)
        .args(["--model", "samplab-tiny", "--set", "max_tokens=3"])
        .output()
        .expect("the samplab binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let models_of = |kind: &str| -> Vec<String> {
        lines
            .iter()
            .filter(|l| l["event"] == kind)
            .map(|l| l["model"].as_str().unwrap_or("none").to_owned())
            .collect()
    };
    assert_eq!(models_of("started"), ["stories260K", "samplab-tiny"]);
    assert_eq!(models_of("token").len(), 6, "{lines:?}");
    assert_eq!(
        models_of("token")[3..],
        ["samplab-tiny", "samplab-tiny", "samplab-tiny"]
    );
    assert_eq!(models_of("done"), ["stories260K", "samplab-tiny"]);
    assert!(lines.iter().all(|l| l["model"].is_string()), "{lines:?}");
}
