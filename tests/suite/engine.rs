//! The generation loop and the worker, on a deterministic fake model whose logits depend on each
//! row's whole history, so any row mix-up in batching, forking or retiring changes the output.

use crate::common;
use crate::common::fake_model::FakeModel;

use samplab::engine::generate::{RunContext, generate};
use samplab::engine::{
    Backend, Engine, Event, LoadedModel, ParkedRow, Prefill, Prompt, ReplayStore, Request,
    RowSource, ScoreRequest, ScoreSample,
};
use samplab::params::SamplingParams;
use samplab::response::{SampleResponse, StopMatched, StopReason};
use std::time::Duration;
use tokenizers::Tokenizer;

const VOCAB: &[&str] = &[
    "<s>", "</s>", "a", "b", "c", "d", "e", " ", "\n", "x", "y", "z", "!", ".", "o", "k",
];
const EOS: u32 = 1;

fn tokenizer() -> Tokenizer {
    common::piece_tokenizer(VOCAB)
}

fn fake(context: usize) -> FakeModel {
    FakeModel::new(VOCAB.len(), context)
}

const PROMPT: [u32; 3] = [0, 2, 3];

fn run(params: &SamplingParams, seed: u64, context: usize) -> (SampleResponse, Vec<Event>) {
    let tokenizer = tokenizer();
    let ctx = RunContext {
        tokenizer: &tokenizer,
        eos_ids: &[EOS],
        model_name: "fake",
        constraint: None,
        record_traces: false,
    };
    let mut events = Vec::new();
    let response = generate(
        &mut fake(context),
        &mut ReplayStore::new(0),
        &ctx,
        7,
        PROMPT.to_vec(),
        params,
        &[],
        seed,
        &mut || false,
        &mut |e| events.push(e),
    )
    .unwrap();
    (response, events)
}

fn params(yaml: &str) -> SamplingParams {
    SamplingParams::from_yaml(yaml).unwrap()
}

#[test]
fn batched_samples_equal_single_runs_with_consecutive_seeds() {
    let batched = params(
        "num_samples: 6\nmax_tokens: 40\nstop: [\"!\", \"ok\"]\ntemperature: 1.3\nlogprobs: 3",
    );
    let (together, _) = run(&batched, 100, 4096);
    let stop_reasons: Vec<_> = together
        .trajectories
        .iter()
        .map(|t| t.stop_reason)
        .collect();
    assert!(
        stop_reasons.contains(&StopReason::Stop)
            && together.trajectories.iter().any(|t| t.token_ids.len() > 5),
        "the samples should end at different steps: {stop_reasons:?}"
    );
    for (i, trajectory) in together.trajectories.iter().enumerate() {
        let single = SamplingParams {
            num_samples: 1,
            ..batched.clone()
        };
        let (alone, _) = run(&single, 100 + i as u64, 4096);
        let mut expected = alone.trajectories[0].clone();
        expected.index = i as u32;
        assert_eq!(trajectory, &expected, "sample {i}");
    }
}

#[test]
fn events_reassemble_the_response() {
    let (response, events) = run(
        &params("num_samples: 3\nmax_tokens: 25\nstop: \"!\"\nseed: 5"),
        5,
        4096,
    );
    let mut texts = vec![String::new(); 3];
    let mut finished = [None; 3];
    for event in &events {
        match event {
            Event::Token { run_id, token } => {
                assert_eq!(*run_id, 7);
                texts[token.sample as usize].push_str(&token.text);
            }
            Event::Finished {
                sample,
                reason,
                tail,
                ..
            } => {
                texts[*sample as usize].push_str(tail);
                finished[*sample as usize] = Some(*reason);
            }
            _ => {}
        }
    }
    assert!(matches!(events[0], Event::Started { ref seeds, .. } if seeds == &[5, 6, 7]));
    for (i, t) in response.trajectories.iter().enumerate() {
        assert_eq!(texts[i], t.text);
        assert_eq!(finished[i], Some(t.stop_reason));
        assert!(!t.text.contains('!'), "stop text is cut: {:?}", t.text);
        if t.stop_reason == StopReason::Stop {
            assert!(
                matches!(t.stop_matched, Some(StopMatched::Text(ref s)) if s == "!")
                    || t.stop_matched == Some(StopMatched::Token(EOS))
            );
        } else {
            assert_eq!(t.token_ids.len(), 25);
        }
    }
}

#[test]
fn the_end_of_the_context_stops_with_length() {
    let (response, _) = run(
        &params("num_samples: 2\ntemperature: 0\nstop: [\"never-matches\"]"),
        1,
        10,
    );
    for t in &response.trajectories {
        let ended_by_eos = t.stop_matched == Some(StopMatched::Token(EOS));
        if !ended_by_eos {
            assert_eq!(t.stop_reason, StopReason::Length);
            assert_eq!(PROMPT.len() + t.token_ids.len(), 10);
        }
    }
}

/// `repetition_detection` ends a sample on the step vLLM's rule says, after vLLM's other stops:
/// every token here is "x", the only one allowed, so the pattern is one "x" four times.
#[test]
fn repetition_detection_stops_after_every_other_stop_as_in_vllm() {
    use StopReason::{Length, RepetitionDetected, Stop};
    let base = "temperature: 0\nallowed_token_ids: [9]\n\
                repetition_detection: {max_pattern_size: 2, min_count: 4}";
    let ended = |extra: &str, context: usize| {
        let (response, _) = run(&params(&format!("{base}\n{extra}")), 1, context);
        let t = &response.trajectories[0];
        (t.stop_reason, t.text.clone(), t.token_ids.len())
    };
    let four = "xxxx".to_owned();
    assert_eq!(ended("", 64), (RepetitionDetected, four.clone(), 4));
    // Text held back for a stop string that never came is shown when the sample ends.
    let held = ended("stop: [\"xxxxxy\"]", 64);
    assert_eq!(held, (RepetitionDetected, four.clone(), 4));
    // A stop string completed on that step wins, as vLLM's detokenizer overrides the scheduler;
    // max_tokens and the context's end come first in the scheduler itself.
    assert_eq!(ended("stop: [\"xxxx\"]", 64), (Stop, String::new(), 4));
    assert_eq!(ended("max_tokens: 4", 64), (Length, four.clone(), 4));
    assert_eq!(ended("", PROMPT.len() + 4), (Length, four, 4));
    // Not before min_tokens.
    let late = ended("min_tokens: 6", 64);
    assert_eq!(late, (RepetitionDetected, "xxxxxx".to_owned(), 6));
}

#[test]
fn greedy_samples_are_identical() {
    let (response, _) = run(
        &params("num_samples: 4\ntemperature: 0\nmax_tokens: 30"),
        9,
        4096,
    );
    let first = &response.trajectories[0];
    for t in &response.trajectories[1..] {
        assert_eq!(t.token_ids, first.token_ids);
    }
}

#[test]
fn prompt_logprobs_score_each_prompt_token() {
    let (response, _) = run(&params("prompt_logprobs: 2\nmax_tokens: 1"), 1, 4096);
    let logprobs = response.prompt_logprobs.unwrap();
    assert_eq!(logprobs.len(), PROMPT.len());
    assert_eq!(logprobs[0], None);
    for (i, lp) in logprobs.iter().enumerate().skip(1) {
        let logits = fake(4096).logits(&PROMPT[..i]);
        let max = logits.iter().cloned().fold(f32::MIN, f32::max);
        let lse = max + logits.iter().map(|l| (l - max).exp()).sum::<f32>().ln();
        let expected = logits[PROMPT[i] as usize] - lse;
        assert!(
            (lp.unwrap() - expected).abs() < 1e-4,
            "{lp:?} vs {expected}"
        );
    }
    let tops = response.prompt_top_logprobs.unwrap();
    assert!(tops[0].is_none());
    for (i, top) in tops.iter().enumerate().skip(1) {
        let top = top.as_ref().unwrap();
        let has_token = top.iter().any(|t| t.0 == PROMPT[i]);
        assert_eq!(
            top.len(),
            if has_token && top.len() == 2 { 2 } else { 3 },
            "{top:?}"
        );
        assert!(has_token, "the scored token is always listed: {top:?}");
    }
}

#[test]
fn an_interrupted_run_ends_every_live_sample_with_abort() {
    let tokenizer = tokenizer();
    let ctx = RunContext {
        tokenizer: &tokenizer,
        eos_ids: &[],
        model_name: "fake",
        constraint: None,
        record_traces: false,
    };
    let mut checks = 0;
    let response = generate(
        &mut fake(4096),
        &mut ReplayStore::new(0),
        &ctx,
        1,
        PROMPT.to_vec(),
        &params("num_samples: 3"),
        &[],
        0,
        &mut || {
            checks += 1;
            checks > 4
        },
        &mut |_| {},
    )
    .unwrap();
    for t in &response.trajectories {
        assert_eq!(t.stop_reason, StopReason::Abort);
        assert_eq!(
            t.token_ids.len(),
            5,
            "one token from the prefill, then four decode steps"
        );
    }
}

fn fake_loaded(delay: Duration) -> LoadedModel {
    let mut backend = fake(4096);
    backend.delay = delay;
    LoadedModel {
        name: "fake".into(),
        device: "cpu".into(),
        backend: Box::new(backend),
        tokenizer: tokenizer(),
        eos_ids: vec![],
        defaults: None,
        chat_template: None,
        templates: Default::default(),
        replay: ReplayStore::new(0),
        warnings: Vec::new(),
        activations: None,
        structured: Default::default(),
        record_traces: false,
        origin: Default::default(),
        encoder: None,
    }
}

/// Engine events into a channel the test reads.
fn forward(events: tokio::sync::mpsc::UnboundedSender<Event>) -> impl FnMut(Event) + Send {
    move |event| {
        let _ = events.send(event);
    }
}

fn next_done(inbox: &mut tokio::sync::mpsc::UnboundedReceiver<Event>) -> (u64, SampleResponse) {
    loop {
        match inbox.blocking_recv().expect("the engine is running") {
            Event::Done { run_id, response } => return (run_id, *response),
            Event::Error { message, .. } => panic!("{message}"),
            _ => {}
        }
    }
}

#[test]
fn a_new_request_cancels_the_running_one_and_runs_cleanly() {
    let (events, mut inbox) = tokio::sync::mpsc::unbounded_channel();
    let engine = Engine::spawn(
        |_| Ok(fake_loaded(Duration::from_millis(2))),
        forward(events),
    );
    let long = params("max_tokens: 100000\nseed: 3");
    engine.run(Request {
        run_id: 1,
        prompt: Prompt::raw("ab"),
        lane: 0,
        params: long,
        branches: Vec::new(),
    });
    loop {
        if let Some(Event::Token { .. }) = inbox.blocking_recv() {
            break;
        }
    }
    let short = params("max_tokens: 5\nseed: 3");
    engine.run(Request {
        run_id: 2,
        prompt: Prompt::raw("ab"),
        lane: 0,
        params: short.clone(),
        branches: Vec::new(),
    });
    let (first_id, first) = next_done(&mut inbox);
    assert_eq!(first_id, 1);
    assert_eq!(first.trajectories[0].stop_reason, StopReason::Abort);
    assert!(first.trajectories[0].token_ids.len() < 100000);
    let (second_id, second) = next_done(&mut inbox);
    assert_eq!(second_id, 2);
    assert_eq!(
        second.prompt_token_ids,
        PROMPT.to_vec(),
        "BOS then the prompt's tokens"
    );
    let (alone, _) = run(&short, 3, 4096);
    assert_eq!(
        second.trajectories, alone.trajectories,
        "the aborted run left nothing behind"
    );

    engine.run(Request {
        run_id: 3,
        prompt: Prompt::raw("ab"),
        lane: 0,
        params: params("max_tokens: 100000"),
        branches: Vec::new(),
    });
    engine.cancel(3);
    let (third_id, third) = next_done(&mut inbox);
    assert_eq!(third_id, 3);
    assert_eq!(third.trajectories[0].stop_reason, StopReason::Abort);
}

#[test]
fn a_failed_load_is_reported_and_runs_get_errors() {
    let (events, mut inbox) = tokio::sync::mpsc::unbounded_channel();
    let engine = Engine::spawn(
        |_| -> anyhow::Result<LoadedModel> { anyhow::bail!("no such file: x.gguf") },
        forward(events),
    );
    engine.run(Request {
        run_id: 4,
        prompt: Prompt::raw("a"),
        lane: 0,
        params: SamplingParams::default(),
        branches: Vec::new(),
    });
    match inbox.blocking_recv() {
        Some(Event::LoadFailed { message }) => assert!(message.contains("x.gguf")),
        other => panic!("expected LoadFailed, got {other:?}"),
    }
    match inbox.blocking_recv() {
        Some(Event::Error { run_id: 4, message }) => assert!(message.contains("x.gguf")),
        other => panic!("expected an Error for run 4, got {other:?}"),
    }
}

#[test]
fn dropping_the_engine_during_a_load_does_not_wait_for_it() {
    let (release_load, load_gate) = std::sync::mpsc::channel::<()>();
    let (events, _inbox) = tokio::sync::mpsc::unbounded_channel();
    let engine = Engine::spawn(
        move |_| {
            // The load ends only when the test says so, which it does after the drop returned.
            let _ = load_gate.recv();
            Ok(fake_loaded(Duration::ZERO))
        },
        forward(events),
    );
    let (dropped, drop_done) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(engine);
        let _ = dropped.send(());
    });
    let result = drop_done.recv_timeout(Duration::from_secs(30));
    let _ = release_load.send(());
    assert!(
        result.is_ok(),
        "drop waited for a load that was still running"
    );
}

fn request(run_id: u64, lane: u32, yaml: &str) -> Request {
    Request {
        run_id,
        prompt: Prompt::raw("ab"),
        lane,
        params: params(yaml),
        branches: Vec::new(),
    }
}

#[test]
fn runs_in_different_lanes_both_finish() {
    let (events, mut inbox) = tokio::sync::mpsc::unbounded_channel();
    let engine = Engine::spawn(
        |_| Ok(fake_loaded(Duration::from_millis(1))),
        forward(events),
    );
    engine.run(request(1, 0, "max_tokens: 30\nseed: 1\nstop: []"));
    engine.run(request(2, 1, "max_tokens: 30\nseed: 2\nstop: []"));
    let mut done = std::collections::BTreeMap::new();
    while done.len() < 2 {
        let (run_id, response) = next_done(&mut inbox);
        done.insert(run_id, response);
    }
    for (run_id, response) in done {
        assert!(
            response
                .trajectories
                .iter()
                .all(|t| t.stop_reason != StopReason::Abort),
            "run {run_id} was cut short by the other lane"
        );
    }
}

#[test]
fn cross_scoring_with_the_same_vocabulary_reproduces_the_sampled_logprobs() {
    let mut model = fake_loaded(Duration::ZERO);
    let run = request(1, 0, "num_samples: 4\nmax_tokens: 12\nseed: 5");
    let response = model.run(&run, &mut || false, &mut |_| {}).unwrap();
    let vocab = model.vocab_fingerprint();
    let scoring = ScoreRequest::new(1, vocab, &Prompt::raw("ab"), &response);

    let same = model.score(&scoring, vocab, &mut || false).unwrap();
    assert_eq!(same.len(), 4);
    for (score, trajectory) in same.iter().zip(&response.trajectories) {
        let mean = common::mean_logprob(&trajectory.logprobs);
        assert!(!score.retokenized);
        assert_eq!(score.tokens, trajectory.token_ids.len());
        assert!(
            (score.mean_logprob - mean).abs() < 1e-5,
            "{} vs {mean}",
            score.mean_logprob
        );
    }

    // Another vocabulary tokenizes the text again; with characters as tokens, plain text is
    // the same sequence again, so its score must not move.
    let text = "cab dx";
    let plain = ScoreRequest {
        samples: vec![ScoreSample {
            index: 0,
            text: text.into(),
            token_ids: model
                .tokenizer
                .encode(text, false)
                .unwrap()
                .get_ids()
                .to_vec(),
        }],
        ..scoring
    };
    let same = model.score(&plain, vocab, &mut || false).unwrap();
    let again = model.score(&plain, vocab ^ 1, &mut || false).unwrap();
    assert!(again[0].retokenized && !same[0].retokenized);
    assert_eq!((again[0].tokens, same[0].tokens), (text.len(), text.len()));
    assert!((again[0].mean_logprob - same[0].mean_logprob).abs() < 1e-9);
}

#[test]
fn the_worker_answers_a_score_request_under_the_scored_run_id() {
    let mut model = fake_loaded(Duration::ZERO);
    let response = model
        .run(
            &request(1, 0, "max_tokens: 5\nseed: 9"),
            &mut || false,
            &mut |_| {},
        )
        .unwrap();
    let (events, mut inbox) = tokio::sync::mpsc::unbounded_channel();
    let engine = Engine::spawn(|_| Ok(fake_loaded(Duration::ZERO)), forward(events));
    engine.score(ScoreRequest::new(41, 0, &Prompt::raw("ab"), &response));
    loop {
        match inbox.blocking_recv().expect("the engine answers") {
            Event::Scored { run_id, scores } => {
                assert_eq!(run_id, 41);
                assert_eq!(scores.len(), 1);
                assert!(scores[0].mean_logprob < 0.0);
                break;
            }
            Event::ScoreFailed { message, .. } => panic!("{message}"),
            _ => {}
        }
    }
}

/// The fake model, but its first decode step panics, as a bug in a kernel would.
struct PanicsOnce {
    inner: FakeModel,
    panicked: bool,
}

impl Backend for PanicsOnce {
    fn kind(&self) -> samplab::engine::BackendKind {
        self.inner.kind()
    }

    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }
    fn weight_bytes(&self) -> u64 {
        self.inner.weight_bytes()
    }
    fn context_length(&self) -> usize {
        self.inner.context_length()
    }
    fn prefill(&mut self, prompt: &[u32], from: usize) -> anyhow::Result<Prefill> {
        self.inner.prefill(prompt, from)
    }
    fn join(&mut self, rows: Vec<RowSource>, len: usize) -> anyhow::Result<()> {
        self.inner.join(rows, len)
    }
    fn decode(&mut self, tokens: &[u32]) -> anyhow::Result<Vec<Vec<f32>>> {
        if !std::mem::replace(&mut self.panicked, true) {
            let empty: &[f32] = &[];
            let _ = empty[tokens.len()];
        }
        self.inner.decode(tokens)
    }
    fn retire(&mut self, keep: &[bool]) -> anyhow::Result<Vec<ParkedRow>> {
        self.inner.retire(keep)
    }
    fn reset(&mut self) {
        self.inner.reset()
    }
}

#[test]
fn a_panic_in_a_run_is_that_runs_error_and_the_engine_keeps_working() {
    let (events, mut inbox) = tokio::sync::mpsc::unbounded_channel();
    let engine = Engine::spawn(
        |_| {
            let mut model = fake_loaded(Duration::ZERO);
            model.backend = Box::new(PanicsOnce {
                inner: fake(4096),
                panicked: false,
            });
            Ok(model)
        },
        forward(events),
    );
    let request = |run_id| Request {
        run_id,
        prompt: Prompt::raw("ab"),
        lane: 0,
        params: params("max_tokens: 4\nseed: 1"),
        branches: Vec::new(),
    };
    engine.run(request(1));
    let message = loop {
        match inbox.blocking_recv().expect("the engine is running") {
            Event::Error { run_id: 1, message } => break message,
            Event::Done { .. } => panic!("the run should have failed"),
            _ => {}
        }
    };
    assert!(
        message.contains("panic") && message.contains("out of bounds"),
        "{message}"
    );
    engine.run(request(2));
    let (run_id, response) = next_done(&mut inbox);
    assert_eq!(run_id, 2);
    assert_eq!(response.trajectories[0].token_ids.len(), 4);
}

#[test]
fn a_panic_while_loading_is_a_failed_load() {
    let (events, mut inbox) = tokio::sync::mpsc::unbounded_channel();
    let engine = Engine::spawn(
        |_| -> anyhow::Result<LoadedModel> { panic!("capacity overflow") },
        forward(events),
    );
    engine.run(Request {
        run_id: 1,
        prompt: Prompt::raw("a"),
        lane: 0,
        params: SamplingParams::default(),
        branches: Vec::new(),
    });
    match inbox.blocking_recv() {
        Some(Event::LoadFailed { message }) => {
            assert!(message.contains("capacity overflow"), "{message}")
        }
        other => panic!("expected LoadFailed, got {other:?}"),
    }
    assert!(matches!(
        inbox.blocking_recv(),
        Some(Event::Error { run_id: 1, .. })
    ));
}
