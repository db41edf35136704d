//! Model disagreement per token (`per_token` of each cross score, `stats.mean_kl`): every figure
//! against an independent computation from the token ids and the raw logits of both models.

use crate::common;

use samplab::engine::LoadedModel;
use samplab::model::device::DeviceChoice;
use samplab::model::source::synthetic::{SyntheticSpec, write_synthetic_gguf};
use samplab::response::SampleResponse;
use std::path::Path;
use std::process::Command;

const PROMPT: &str = "Once upon a time";

/// Two short samples drawn hot, so that the twins disagree on them.
const TWO_HOT_SAMPLES: [&str; 4] = [
    "num_samples=2",
    "max_tokens=8",
    "seed=11",
    "temperature=1.5",
];

/// Two of them written with different seeds share the vocabulary but not the distributions.
const TWIN: SyntheticSpec = SyntheticSpec {
    name: "twin",
    ..common::TINY_LLAMA
};

/// Two twins of different weights in `dir`.
fn twins(dir: &Path) -> [std::path::PathBuf; 2] {
    [1, 2].map(|seed| {
        let path = dir.join(format!("twin{seed}.gguf"));
        write_synthetic_gguf(&path, &TWIN, candle_core::quantized::GgmlDType::F32, seed).unwrap();
        path
    })
}

/// The raw logits after `ids`, from a fresh forward pass over all of them.
fn logits_after(model: &mut LoadedModel, ids: &[u32]) -> Vec<f32> {
    model.backend.reset();
    let mut rows = model.backend.prefill(ids, ids.len() - 1).unwrap().logits;
    rows.pop().expect("one row")
}

/// log_softmax in f64.
fn log_probs(logits: &[f32]) -> Vec<f64> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = logits.iter().map(|&l| (l as f64 - max).exp()).sum();
    logits.iter().map(|&l| l as f64 - max - sum.ln()).collect()
}

/// Checks every token of `response`'s samples: its figures under `scorer` equal those computed
/// here from the logits of `own` (the sampling model) and `scorer`; returns all the KLs.
fn check_figures(
    response: &SampleResponse,
    own: &mut LoadedModel,
    scorer: &mut LoadedModel,
) -> Vec<f64> {
    let mut all = Vec::new();
    for trajectory in &response.trajectories {
        let [score] = &trajectory.cross_scores.as_ref().expect("scored")[..] else {
            panic!("one other model")
        };
        let per_token = score.per_token.as_ref().expect("per-token figures");
        let (logprobs, ranks, kl) = (
            per_token.logprobs.as_ref().unwrap(),
            per_token.ranks.as_ref().unwrap(),
            per_token
                .kl
                .as_ref()
                .unwrap_or_else(|| panic!("{per_token:?}")),
        );
        let n = trajectory.token_ids.len();
        assert!(n > 0);
        assert_eq!((logprobs.len(), ranks.len(), kl.len()), (n, n, n));
        for (j, &id) in trajectory.token_ids.iter().enumerate() {
            let before = [&response.prompt_token_ids[..], &trajectory.token_ids[..j]].concat();
            let a = log_probs(&logits_after(own, &before));
            let b_logits = logits_after(scorer, &before);
            let b = log_probs(&b_logits);
            let id = id as usize;
            assert!(
                (logprobs[j].unwrap() as f64 - b[id]).abs() < 1e-4,
                "logprob at {j}"
            );
            let rank = 1
                + (0..b.len())
                    .filter(|&v| {
                        b_logits[v] > b_logits[id] || (b_logits[v] == b_logits[id] && v < id)
                    })
                    .count();
            assert_eq!(ranks[j], Some(rank as u32), "rank at {j}");
            let expected: f64 = a.iter().zip(&b).map(|(la, lb)| la.exp() * (la - lb)).sum();
            assert!(
                (kl[j] - expected).abs() < 1e-5 + 1e-4 * expected,
                "KL at {j}: {} vs {expected}",
                kl[j]
            );
            // The sampling model's own logprob agrees with its distribution here.
            assert!((trajectory.logprobs[j] as f64 - a[id]).abs() < 1e-4);
        }
        all.extend(kl);
    }
    all
}

#[test]
fn logprob_rank_and_kl_of_every_token_match_the_raw_logits_of_both_models() {
    let dir = tempfile::tempdir().unwrap();
    let [one, two] = twins(dir.path());
    let both = common::compare(PROMPT, &[&one, &two], &TWO_HOT_SAMPLES);
    let mut models = [&one, &two].map(|p| common::load_at(p, DeviceChoice::Cpu));
    for (i, response) in both.iter().enumerate() {
        let [own, scorer] = if i == 0 {
            let [a, b] = &mut models;
            [a, b]
        } else {
            let [a, b] = &mut models;
            [b, a]
        };
        let kls = check_figures(response, own, scorer);
        assert!(
            kls.iter().any(|&kl| kl > 1e-3),
            "different weights disagree"
        );
        let stats = response.stats.as_ref().unwrap();
        let means = stats.mean_kl.as_ref().expect("mean_kl");
        let other = &both[1 - i].model;
        let mean = kls.iter().sum::<f64>() / kls.len() as f64;
        assert_eq!(means.len(), 1);
        assert!((means[other] - mean).abs() < 1e-12, "{means:?} vs {mean}");
    }
}

/// The plain output says each sample's mean KL under the other model, the mean of the JSON's
/// per-token figures.
#[test]
fn the_plain_output_gives_each_samples_mean_kl() {
    let dir = tempfile::tempdir().unwrap();
    let [one, two] = twins(dir.path());
    let json = common::compare(PROMPT, &[&one, &two], &TWO_HOT_SAMPLES);
    let mut command = Command::new(env!("CARGO_BIN_EXE_samplab"));
    command.args(["sample", "--prompt", PROMPT]);
    command.arg("--model").arg(&one).arg("--model").arg(&two);
    for set in TWO_HOT_SAMPLES {
        command.args(["--set", set]);
    }
    let out = command.output().expect("the samplab binary runs");
    assert!(out.status.success(), "{}", common::stderr(&out));
    let plain = String::from_utf8(out.stdout).unwrap();
    let said: Vec<&str> = plain
        .lines()
        .filter_map(|line| line.split("mean KL ").nth(1))
        .map(|rest| rest.trim_end_matches(" nats"))
        .collect();
    let expected: Vec<String> = json
        .iter()
        .flat_map(|response| &response.trajectories)
        .map(|trajectory| {
            let scores = trajectory.cross_scores.as_ref().unwrap();
            let kl = scores[0].per_token.as_ref().unwrap().kl.as_ref().unwrap();
            format!("{:.3}", kl.iter().sum::<f64>() / kl.len() as f64)
        })
        .collect();
    assert_eq!(said, expected, "{plain}");
}

#[test]
fn a_model_against_itself_has_no_kl_and_ranks_its_greedy_tokens_first() {
    let dir = tempfile::tempdir().unwrap();
    let [one, _] = twins(dir.path());
    let both = common::compare(
        PROMPT,
        &[&one, &one],
        &["num_samples=2", "max_tokens=8", "temperature=0"],
    );
    for response in &both {
        for trajectory in &response.trajectories {
            let per_token = trajectory.cross_scores.as_ref().unwrap()[0]
                .per_token
                .clone()
                .unwrap();
            let kl = per_token.kl.unwrap();
            assert_eq!(kl.len(), trajectory.token_ids.len());
            assert!(kl.iter().all(|&kl| kl.abs() < 1e-9), "{kl:?}");
            // Greedy picks the argmax, lowest id on ties: rank 1 under the same model.
            assert!(per_token.ranks.unwrap().iter().all(|&r| r == Some(1)));
            for (theirs, own) in per_token.logprobs.unwrap().iter().zip(&trajectory.logprobs) {
                assert!((theirs.unwrap() - own).abs() < 1e-4);
            }
        }
        let means = response.stats.as_ref().unwrap().mean_kl.clone().unwrap();
        assert!(means.values().all(|&m| m.abs() < 1e-9), "{means:?}");
    }
}

/// The playground on two real engines: the sampling model's worker hands its distributions to
/// the scoring one, and every token of the columns gets its KL.
#[test]
fn the_playground_gets_the_kl_of_every_token_from_two_real_engines() {
    use samplab::engine::Engine;
    use samplab::tui::{Action, App, KeyMap, ModelId};
    let dir = tempfile::tempdir().unwrap();
    let twins = twins(dir.path());
    let (events_tx, events) = std::sync::mpsc::channel();
    let engines: Vec<Engine> = twins
        .iter()
        .enumerate()
        .map(|(id, path)| {
            let (path, events_tx) = (path.clone(), events_tx.clone());
            Engine::spawn(
                move |_| Ok(common::load_at(&path, DeviceChoice::Cpu)),
                move |event| {
                    let _ = events_tx.send((ModelId(id), event));
                },
            )
        })
        .collect();
    let mut state = common::tui::state_sized(200, 50);
    let specs: Vec<String> = twins.iter().map(|p| p.display().to_string()).collect();
    state.comparison.compare(&specs, None);
    let mut app = App::new(state, engines, KeyMap::default());
    let scored = |app: &App<Engine>| {
        let columns = &app.state.columns.columns;
        columns.len() == 2
            && columns.iter().all(|c| {
                c.cross.iter().any(|s| {
                    s.per_token
                        .as_ref()
                        .is_some_and(|p| p.kl.is_some() || p.null_reason.is_some())
                })
            })
    };
    while !scored(&app) {
        // A cap against a hang, not a timing.
        let (model, event) = events
            .recv_timeout(std::time::Duration::from_secs(120))
            .expect("the engines answer");
        app.dispatch(Action::Engine(model, event));
    }
    for column in &app.state.columns.columns {
        let per_token = column.cross[0].per_token.as_ref().unwrap();
        let kl = per_token
            .kl
            .as_ref()
            .unwrap_or_else(|| panic!("{per_token:?}"));
        assert_eq!(kl.len(), column.tokens.len());
        assert!(kl.iter().all(|&kl| kl >= 0.0) && kl.iter().any(|&kl| kl > 1e-3));
    }
}

/// At the engine: the sampling model's rows reach the scorer one sample at a time; where they
/// cannot come, the KL is null with the reason and the other figures stay.
#[test]
fn the_scorer_reports_why_the_sampling_models_distributions_are_missing() {
    use samplab::engine::disagreement::{Wanted, row_channel};
    use samplab::engine::{Prompt, Request, Runner, ScoreRequest};
    let (Some(mut a), Some(mut b)) = (common::loaded_test_model(), common::loaded_test_model())
    else {
        return;
    };
    let prompt = Prompt::raw(PROMPT);
    let run = Request {
        run_id: 1,
        prompt: prompt.clone(),
        lane: 0,
        params: samplab::params::SamplingParams::from_yaml(
            "max_tokens: 6\nseed: 3\nnum_samples: 3",
        )
        .unwrap(),
        branches: Vec::new(),
    };
    let response = a.run(&run, &mut || false, &mut |_| {}).unwrap();
    let vocab = a.vocab_fingerprint();
    let request = ScoreRequest::new(1, vocab, &prompt, &response);
    let reasons = |b: &mut LoadedModel, request: ScoreRequest| -> Vec<String> {
        let scores = b.score(&request, vocab, &mut || false).unwrap();
        scores
            .into_iter()
            .zip(&response.trajectories)
            .map(|(score, trajectory)| {
                let per_token = score.per_token.unwrap();
                let n = trajectory.token_ids.len();
                assert_eq!(per_token.logprobs.map(|l| l.len()), Some(n));
                assert_eq!(per_token.ranks.map(|r| r.len()), Some(n));
                assert_eq!(per_token.kl, None);
                per_token.null_reason.expect("a reason")
            })
            .collect()
    };

    // A served model says it has none.
    let (to, feed) = row_channel();
    to.send(Err("a served model gives no full distributions".into()))
        .unwrap();
    let why = reasons(&mut b, request.clone().with_feed(feed));
    assert!(why.iter().all(|w| w.contains("a served model")), "{why:?}");

    // The sampling model stopped (a newer run went first).
    let (to, feed) = row_channel();
    drop(to);
    let why = reasons(&mut b, request.clone().with_feed(feed));
    assert!(why.iter().all(|w| w.contains("stopped before")), "{why:?}");

    // Never asked.
    let why = reasons(&mut b, request.clone());
    assert!(why.iter().all(|w| w.contains("not asked for")), "{why:?}");

    // Asked: the sampling model's worker sends while the scorer takes, one sample at a time.
    let (to, feed) = row_channel();
    let rows = request.rows_request(Wanted::Rows, to);
    let scores = std::thread::scope(|scope| {
        scope.spawn(|| a.rows(&rows, &mut || false).unwrap());
        b.score(&request.clone().with_feed(feed), vocab, &mut || false)
            .unwrap()
    });
    for (score, trajectory) in scores.iter().zip(&response.trajectories) {
        let kl = score.per_token.as_ref().unwrap().kl.clone().unwrap();
        assert_eq!(kl.len(), trajectory.token_ids.len());
        assert!(
            kl.iter().all(|&kl| kl.abs() < 1e-9),
            "the same model: {kl:?}"
        );
    }
}
