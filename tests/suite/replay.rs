//! Instant re-runs: a run after a parameter change replays what the run before kept and decodes
//! only from the first changed token, and must equal a fresh run exactly; the prompt cache
//! runs only the positions a new prompt does not share with the last.

use crate::common;
use crate::common::fake_model::FakeModel;
use samplab::model::device::DeviceChoice;

use proptest::prelude::*;
use samplab::engine::generate::{RunContext, generate};
use samplab::engine::score::common_prefix;
use samplab::engine::trace::trace;
use samplab::engine::{Branch, LoadedModel, Prompt, ReplayStore, Request, TraceRequest};
use samplab::params::SamplingParams;
use samplab::response::{BranchOrigin, SampleResponse, StopReason};
use samplab::sampling::{SampleState, Sampler, TokenLists, log_normalizer};
use tokenizers::Tokenizer;

const VOCAB: &[&str] = &[
    "<s>", "</s>", "a", "b", "c", "d", "e", " ", "\n", "x", "y", "z", "!", ".", "o", "k",
];
const EOS: u32 = 1;
const PROMPT: [u32; 4] = [0, 2, 3, 7];
const SEED: u64 = 11;

struct Fake {
    model: FakeModel,
    store: ReplayStore,
    tokenizer: Tokenizer,
}

impl Fake {
    fn new(budget: usize) -> Self {
        Self {
            model: FakeModel::new(VOCAB.len(), 4096),
            store: ReplayStore::new(budget),
            tokenizer: common::piece_tokenizer(VOCAB),
        }
    }

    /// Runs `params` on `prompt`, interrupted once `interrupt_after` checks have passed.
    fn run_until(
        &mut self,
        prompt: &[u32],
        params: &SamplingParams,
        interrupt_after: Option<usize>,
    ) -> SampleResponse {
        self.run_branches(prompt, params, &[], interrupt_after)
    }

    /// Runs `params` with `branches` on `prompt`, interrupted once `interrupt_after` checks
    /// have passed.
    fn run_branches(
        &mut self,
        prompt: &[u32],
        params: &SamplingParams,
        branches: &[Branch],
        interrupt_after: Option<usize>,
    ) -> SampleResponse {
        let ctx = RunContext {
            tokenizer: &self.tokenizer,
            eos_ids: &[EOS],
            model_name: "fake",
            constraint: None,
            record_traces: false,
        };
        let mut checks = 0;
        generate(
            &mut self.model,
            &mut self.store,
            &ctx,
            1,
            prompt.to_vec(),
            params,
            branches,
            SEED,
            &mut || {
                checks += 1;
                interrupt_after.is_some_and(|n| checks > n)
            },
            &mut |_| {},
        )
        .unwrap()
    }

    fn run(&mut self, prompt: &[u32], params: &SamplingParams) -> SampleResponse {
        self.run_until(prompt, params, None)
    }
}

/// What a fresh model with nothing kept makes of `params`.
fn fresh(prompt: &[u32], params: &SamplingParams) -> SampleResponse {
    Fake::new(0).run(prompt, params)
}

/// Everything a run produced, timings aside.
fn assert_same_run(got: &SampleResponse, want: &SampleResponse, context: &str) {
    assert_eq!(got.prompt_token_ids, want.prompt_token_ids, "{context}");
    assert_eq!(got.prompt_logprobs, want.prompt_logprobs, "{context}");
    assert_eq!(
        got.prompt_top_logprobs, want.prompt_top_logprobs,
        "{context}"
    );
    assert_eq!(got.trajectories.len(), want.trajectories.len(), "{context}");
    for (a, b) in got.trajectories.iter().zip(&want.trajectories) {
        let step = common_prefix(&a.token_ids, &b.token_ids);
        assert_eq!(
            a.token_ids, b.token_ids,
            "{context}: sample {} parts at step {step}",
            a.index
        );
        if let Some(i) = (0..a.logprobs.len()).find(|&i| a.logprobs[i] != b.logprobs[i]) {
            panic!(
                "{context}: sample {} logprob {i}: {} vs {}",
                a.index, a.logprobs[i], b.logprobs[i]
            );
        }
        assert_eq!(a, b, "{context}: sample {}", a.index);
    }
}

/// What the store keeps of each sample seed, as the tests expect it: the longest known tokens
/// and how many steps after the first have kept logits.
#[derive(Default)]
struct Kept {
    records: std::collections::HashMap<u64, (Vec<u32>, usize)>,
    last_seeds: Vec<u64>,
}

impl Kept {
    /// Tokens a run must sample from kept logits, per sample: step 0 (the prompt's logits), and
    /// each later step whose history the kept tokens share and whose logits were computed.
    fn replays(&mut self, run: &SampleResponse) -> Vec<usize> {
        let seeds: Vec<u64> = run.trajectories.iter().map(|t| t.seed).collect();
        let last = std::mem::replace(&mut self.last_seeds, seeds.clone());
        self.records
            .retain(|seed, _| seeds.contains(seed) || last.contains(seed));
        run.trajectories
            .iter()
            .map(|t| {
                let len = t.token_ids.len();
                let replays = match self.records.get(&t.seed) {
                    Some((kept, computed)) => {
                        (common_prefix(kept, &t.token_ids).min(*computed) + 1).min(len)
                    }
                    None => 1.min(len),
                };
                let record = self.records.entry(t.seed).or_default();
                if !record.0.starts_with(&t.token_ids) {
                    *record = (t.token_ids.clone(), len.saturating_sub(1));
                }
                replays
            })
            .collect()
    }
}

fn arb_params() -> impl Strategy<Value = SamplingParams> {
    let stop = prop_oneof![
        Just(None),
        Just(Some("stop: [\"!\"]")),
        Just(Some("stop: [\"o k\", \"\\n\"]")),
        Just(Some("stop: [13]")),
    ];
    (
        (
            prop_oneof![Just(0.0f32), 0.2f32..2.0],
            prop_oneof![Just(-1i32), 1i32..8],
            prop_oneof![Just(1.0f32), 0.3f32..1.0],
            prop_oneof![Just(0.0f32), 0.0f32..0.4],
            prop_oneof![Just(1.0f32), 0.7f32..1.8],
        ),
        (
            1u32..40,
            1u32..6,
            stop,
            prop_oneof![Just(None), (0u32..4).prop_map(Some)],
            prop_oneof![Just(None), (0u32..3).prop_map(Some)],
        ),
    )
        .prop_map(
            |((temperature, top_k, top_p, min_p, penalty), (max, n, stop, logprobs, prompt_lp))| {
                let mut params = SamplingParams {
                    temperature,
                    top_k,
                    top_p,
                    min_p,
                    repetition_penalty: penalty,
                    max_tokens: Some(max),
                    num_samples: n,
                    logprobs,
                    prompt_logprobs: prompt_lp,
                    ..SamplingParams::default()
                };
                if let Some(stop) = stop {
                    let with_stop = SamplingParams::from_yaml(stop).unwrap();
                    params.stop = with_stop.stop;
                }
                params
            },
        )
}

/// A small change of one or more parameters, as a slider makes.
fn nudge(base: &SamplingParams, which: u8, amount: f32) -> SamplingParams {
    let mut p = base.clone();
    match which % 8 {
        0 => p.temperature = (p.temperature + amount * 0.1).max(0.0),
        1 => p.top_p = (p.top_p - amount.abs() * 0.1).clamp(0.05, 1.0),
        2 => p.min_p = (p.min_p + amount.abs() * 0.05).min(1.0),
        3 => p.repetition_penalty = (p.repetition_penalty + amount * 0.2).max(0.1),
        4 => {
            p.max_tokens = p
                .max_tokens
                .map(|m| (m as f32 * (1.0 + amount)).max(1.0) as u32)
        }
        5 => p.num_samples = (p.num_samples as i32 + amount.signum() as i32).clamp(1, 6) as u32,
        6 => p.stop = SamplingParams::from_yaml("stop: [\"a\"]").unwrap().stop,
        _ => {
            p.top_k = if p.top_k < 0 { 5 } else { -1 };
            p.temperature = (p.temperature + amount * 0.05).max(0.0);
        }
    }
    p
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]

    /// A chain of re-runs, each after a change of one or two parameters: every one equals a
    /// fresh run, and decodes exactly the tokens its divergence points leave.
    #[test]
    fn a_re_run_equals_a_fresh_run_and_decodes_only_past_its_divergence(
        base in arb_params(),
        changes in proptest::collection::vec((any::<u8>(), -0.9f32..0.9, any::<u8>()), 1..4),
    ) {
        let mut fake = Fake::new(64 << 20);
        let first = fake.run(&PROMPT, &base);
        assert_same_run(&first, &fresh(&PROMPT, &base), "the first run");
        let mut kept = Kept::default();
        kept.replays(&first);
        let mut params = base;
        for (which, amount, second) in changes {
            params = nudge(&params, which, amount);
            if second % 3 == 0 {
                params = nudge(&params, second, -amount);
            }
            let decoded_before = fake.model.decoded;
            let after = fake.run(&PROMPT, &params);
            assert_same_run(&after, &fresh(&PROMPT, &params), &format!("{params:?}"));

            let replays = kept.replays(&after);
            let lengths: Vec<usize> = after.trajectories.iter().map(|t| t.token_ids.len()).collect();
            let decoded: usize = lengths.iter().zip(&replays).map(|(len, r)| len - r).sum();
            prop_assert_eq!(after.timings.tokens_replayed as usize, replays.iter().sum::<usize>());
            prop_assert_eq!(after.timings.tokens_decoded as usize, decoded);
            prop_assert_eq!(fake.model.decoded - decoded_before, decoded, "rows the model ran");
            prop_assert_eq!(after.timings.prefill_tokens, 0, "the prompt's logits were kept");
        }
    }

    /// With a budget too small for every step, the earliest are kept and the re-run is still
    /// exact.
    #[test]
    fn a_small_budget_keeps_the_earliest_steps_and_stays_exact(
        base in arb_params(),
        which in any::<u8>(),
        amount in -0.9f32..0.9,
        budget_steps in 0usize..12,
    ) {
        let mut fake = Fake::new(budget_steps * VOCAB.len() * 4);
        fake.run(&PROMPT, &base);
        prop_assert!(fake.store.used() <= budget_steps * VOCAB.len() * 4);
        let params = nudge(&base, which, amount);
        let after = fake.run(&PROMPT, &params);
        assert_same_run(&after, &fresh(&PROMPT, &params), &format!("{params:?}"));
    }

    /// A run cancelled while replaying or decoding leaves the store consistent: the next run,
    /// with the same or other parameters, equals a fresh one.
    #[test]
    fn a_cancelled_re_run_leaves_the_next_run_exact(
        base in arb_params(),
        which in any::<u8>(),
        amount in -0.9f32..0.9,
        cancel_after in 0usize..30,
        same_again in any::<bool>(),
    ) {
        let mut fake = Fake::new(64 << 20);
        fake.run(&PROMPT, &base);
        let changed = nudge(&base, which, amount);
        let cancelled = fake.run_until(&PROMPT, &changed, Some(cancel_after));
        prop_assert!(cancelled.trajectories.iter().all(|t| t.stop_reason != StopReason::Error));
        let next = if same_again { changed } else { nudge(&changed, which.wrapping_add(3), amount) };
        let after = fake.run(&PROMPT, &next);
        assert_same_run(&after, &fresh(&PROMPT, &next), &format!("{next:?}"));
    }
}

#[test]
fn a_change_that_alters_no_token_decodes_nothing() {
    let base = SamplingParams::from_yaml(
        "temperature: 0.8\ntop_p: 0.9\nmax_tokens: 30\nnum_samples: 4\nstop: []",
    )
    .unwrap();
    let mut fake = Fake::new(64 << 20);
    fake.run(&PROMPT, &base);
    for change in ["max_tokens=20", "num_samples=3", "logprobs=5"] {
        let mut params = base.clone();
        params.set_assignment(change).unwrap();
        let decoded_before = fake.model.decoded;
        let after = fake.run(&PROMPT, &params);
        assert_eq!(fake.model.decoded, decoded_before, "{change} ran the model");
        assert_eq!(after.timings.tokens_decoded, 0, "{change}");
        assert_same_run(&after, &fresh(&PROMPT, &params), change);
        fake.run(&PROMPT, &base);
    }
}

/// adaptive-p's memory runs through every step, kept per sample: after each change of its
/// knobs or of a stage before it, every sample of the re-run equals a fresh run.
#[test]
fn adaptive_p_re_runs_equal_fresh_runs() {
    let base = SamplingParams::from_yaml(
        "engine: llama.cpp\nmin_p: 0.02\nadaptive_target: 0.3\nmax_tokens: 30\nnum_samples: 4\n\
         stop: []",
    )
    .unwrap();
    let mut fake = Fake::new(64 << 20);
    let first = fake.run(&PROMPT, &base);
    assert_same_run(&first, &fresh(&PROMPT, &base), "the first run");
    for change in [
        "adaptive_target=0.35",
        "adaptive_decay=0.5",
        "min_p=0.05",
        "adaptive_target=-1",
        "adaptive_target=0.9",
    ] {
        let mut params = base.clone();
        params.set_assignment(change).unwrap();
        let after = fake.run(&PROMPT, &params);
        assert!(
            after.timings.tokens_replayed > 0,
            "{change} replayed nothing"
        );
        assert_same_run(&after, &fresh(&PROMPT, &params), change);
    }
}

#[test]
fn the_prompt_cache_runs_only_what_a_new_prompt_does_not_share() {
    let params = SamplingParams::from_yaml("max_tokens: 6\nnum_samples: 2").unwrap();
    let mut fake = Fake::new(64 << 20);
    let long: Vec<u32> = [0, 2, 3, 4, 5, 6, 9, 10, 11, 2, 3].to_vec();
    let cases: [(&str, Vec<u32>, usize); 5] = [
        ("the first prompt", long.clone(), long.len()),
        ("the same prompt", long.clone(), 0),
        (
            "its last two tokens edited",
            [&long[..9], &[14, 15]].concat(),
            2,
        ),
        ("a shorter prompt", long[..5].to_vec(), 1),
        ("a different prompt", vec![0, 9, 9, 9], 3),
    ];
    for (what, prompt, computed) in cases {
        let prefilled = fake.model.prefilled;
        let response = fake.run(&prompt, &params);
        assert_eq!(response.timings.prefill_tokens, computed, "{what}");
        assert_eq!(fake.model.prefilled - prefilled, computed, "{what}");
        assert_same_run(&response, &fresh(&prompt, &params), what);
    }
}

#[test]
fn another_prompt_replays_nothing_and_another_seed_only_its_own_samples() {
    let params = SamplingParams::from_yaml("max_tokens: 10\nnum_samples: 3").unwrap();
    let mut fake = Fake::new(64 << 20);
    fake.run(&PROMPT, &params);
    let other = [0, 2, 3, 8];
    let response = fake.run(&other, &params);
    assert_eq!(response.timings.tokens_replayed, 0);
    assert_same_run(&response, &fresh(&other, &params), "another prompt");

    // Sample i is seeded SEED + i: a seed one higher finds two of its samples kept.
    let mut shifted = params.clone();
    shifted.seed = Some(SEED + 1);
    fake.run(
        &other,
        &SamplingParams {
            seed: Some(SEED),
            ..params.clone()
        },
    );
    let ctx_seed = fake.run(&other, &shifted);
    let full: Vec<usize> = ctx_seed
        .trajectories
        .iter()
        .map(|t| t.token_ids.len())
        .collect();
    assert!(ctx_seed.timings.tokens_replayed as usize >= full[0] + full[1]);
}

fn stories_run(
    model: &mut LoadedModel,
    prompt: &str,
    params: &SamplingParams,
    interrupt_after: Option<usize>,
) -> SampleResponse {
    stories_branches(model, prompt, params, &[], interrupt_after)
}

pub(crate) fn stories_branches(
    model: &mut LoadedModel,
    prompt: &str,
    params: &SamplingParams,
    branches: &[Branch],
    interrupt_after: Option<usize>,
) -> SampleResponse {
    let request = Request {
        run_id: 1,
        prompt: Prompt::raw(prompt),
        lane: 0,
        params: params.clone(),
        branches: branches.to_vec(),
    };
    let mut checks = 0;
    model
        .run(
            &request,
            &mut || {
                checks += 1;
                interrupt_after.is_some_and(|n| checks > n)
            },
            &mut |_| {},
        )
        .unwrap()
}

fn stories_fresh(model: &mut LoadedModel, prompt: &str, params: &SamplingParams) -> SampleResponse {
    model.replay.clear();
    model.backend.reset();
    stories_run(model, prompt, params, None)
}

/// On the real model, re-runs after each change equal fresh runs token for token and logprob
/// for logprob (the very same f32 values), also after a cancelled run.
#[test]
fn stories260k_re_runs_equal_fresh_runs_exactly() {
    let Some(mut model) = common::loaded_test_model() else {
        return;
    };
    let prompt = "Once upon a time, there was a little girl named Lily. She loved to play";
    let base = SamplingParams::from_yaml(
        "temperature: 0.9\ntop_p: 0.9\nseed: 5\nmax_tokens: 48\nnum_samples: 4\nlogprobs: 2\n\
         prompt_logprobs: 1",
    )
    .unwrap();
    let changes = [
        "top_p=0.92",
        "min_p=0.05",
        "temperature=0.95",
        "repetition_penalty=1.2",
        "stop=[\".\"]",
        "max_tokens=64",
        "num_samples=6",
        "num_samples=2",
        "top_k=5",
    ];
    let first = stories_run(&mut model, prompt, &base, None);
    for (i, change) in changes.iter().enumerate() {
        let mut params = base.clone();
        params.set_assignment(change).unwrap();
        // Every third re-run is cancelled part-way first.
        if i % 3 == 2 {
            stories_run(&mut model, prompt, &params, Some(7));
        }
        let rerun = stories_run(&mut model, prompt, &params, None);
        let fresh = stories_fresh(&mut model, prompt, &params);
        assert_same_run(&rerun, &fresh, change);
        assert!(
            rerun.timings.tokens_replayed > 0,
            "{change}: nothing replayed"
        );
        stories_run(&mut model, prompt, &base, None);
    }
    let again = stories_run(&mut model, prompt, &base, None);
    assert_same_run(&again, &first, "the base parameters again");
    assert_eq!(again.timings.tokens_decoded, 0);
}

/// A prompt edited at its end runs only the edited positions, and the samples equal a fresh
/// run's to the bit (the attention of a prefill from mid-prompt sums as one from the start).
#[test]
fn stories260k_prompt_cache_reuses_the_shared_prefix() {
    let Some(mut model) = common::loaded_test_model() else {
        return;
    };
    let params =
        SamplingParams::from_yaml("temperature: 0.8\nseed: 3\nmax_tokens: 24\nnum_samples: 2")
            .unwrap();
    let prompt = "Once upon a time, there was a little dog named Max. He liked to run in the park";
    stories_run(&mut model, prompt, &params, None);
    for edited in [
        "Once upon a time, there was a little dog named Max. He liked to run in the garden",
        "Once upon a time, there was a little dog named Max.",
        "The sun was hot",
    ] {
        let rerun = stories_run(&mut model, edited, &params, None);
        let total = rerun.prompt_token_ids.len();
        let shared = common_prefix(&rerun.prompt_token_ids, &model.encode(prompt).unwrap());
        assert_eq!(
            rerun.timings.prefill_tokens,
            total - shared.min(total - 1),
            "{edited}"
        );
        let fresh = stories_fresh(&mut model, edited, &params);
        assert_eq!(fresh.timings.prefill_tokens, total);
        for (a, b) in rerun.trajectories.iter().zip(&fresh.trajectories) {
            assert_eq!(a.token_ids, b.token_ids, "{edited}");
            for (x, y) in a.logprobs.iter().zip(&b.logprobs) {
                assert_eq!(x.to_bits(), y.to_bits(), "{edited}: {x} vs {y}");
            }
        }
        stories_run(&mut model, prompt, &params, None);
    }
}

/// On Gemma 3, with a prompt past its 512-token window: a re-run after a change, and a prompt
/// edited at its end, equal fresh runs to the bit; the edit prefills only the edited positions.
#[test]
fn gemma3_re_runs_and_prompt_edits_past_the_window_equal_fresh_runs() {
    let Some(mut model) = common::loaded_gemma() else {
        return;
    };
    let sentence = "Tom had a small red boat. Every morning he rowed it across the lake to see \
                    his friend Mia, who lived in a blue house by the water. ";
    let prompt = sentence.repeat(20);
    assert!(
        model.encode(&prompt).unwrap().len() > 600,
        "past the window"
    );
    let base = SamplingParams::from_yaml(
        "temperature: 0.9\ntop_p: 0.95\nseed: 4\nmax_tokens: 12\nnum_samples: 2\nlogprobs: 2",
    )
    .unwrap();
    stories_run(&mut model, &prompt, &base, None);
    let mut changed = base.clone();
    changed.set_assignment("presence_penalty=0.3").unwrap();
    let rerun = stories_run(&mut model, &prompt, &changed, None);
    assert!(rerun.timings.tokens_replayed > 0, "nothing replayed");
    assert_eq!(rerun.timings.prefill_tokens, 0, "the prompt is cached");
    let fresh = stories_fresh(&mut model, &prompt, &changed);
    assert_same_run(&rerun, &fresh, "top_k=20");

    let edited = format!("{prompt}And then");
    let rerun = stories_run(&mut model, &edited, &base, None);
    let total = rerun.prompt_token_ids.len();
    let shared = common_prefix(&rerun.prompt_token_ids, &model.encode(&prompt).unwrap());
    assert_eq!(rerun.timings.prefill_tokens, total - shared.min(total - 1));
    let fresh = stories_fresh(&mut model, &edited, &base);
    assert_same_run(&rerun, &fresh, "an edited prompt");
}

/// On Gemma 3, with a prompt long enough that the prompt cache's windowed layers drop their
/// oldest positions: an edit near the start runs the whole prompt again (those layers can no
/// longer be cut back there), an edit near the end only the edited positions; both equal
/// fresh runs.
#[test]
fn gemma3_prompt_edits_before_what_the_window_kept_run_the_prompt_again() {
    let Some(mut model) = common::loaded_gemma() else {
        return;
    };
    let sentence = "Tom had a small red boat. Every morning he rowed it across the lake to see \
                    his friend Mia, who lived in a blue house by the water. ";
    let prompt = sentence.repeat(37);
    let total = model.encode(&prompt).unwrap().len();
    assert!(
        total > 1030,
        "{total} tokens: past two slices and the room to rewind"
    );
    let params =
        SamplingParams::from_yaml("temperature: 0.9\nseed: 4\nmax_tokens: 3\nnum_samples: 1")
            .unwrap();
    stories_run(&mut model, &prompt, &params, None);
    let early = format!("Anna{}", &prompt[3..]);
    let rerun = stories_run(&mut model, &early, &params, None);
    assert_eq!(
        rerun.timings.prefill_tokens as usize,
        rerun.prompt_token_ids.len(),
        "the whole prompt runs again"
    );
    let late = format!("{early}And then");
    let rerun = stories_run(&mut model, &late, &params, None);
    assert!(
        rerun.timings.prefill_tokens < 10,
        "{}",
        rerun.timings.prefill_tokens
    );
    let fresh = stories_fresh(&mut model, &late, &params);
    assert_same_run(&rerun, &fresh, "an edit at the end of a long prompt");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]

    /// Random base parameters and a random change on stories260K: the re-run equals a fresh run
    /// to the bit.
    #[test]
    fn stories260k_random_re_runs_equal_fresh_runs(
        base in arb_params(),
        which in any::<u8>(),
        amount in -0.9f32..0.9,
    ) {
        let Some(mut model) = common::loaded_test_model() else {
            return Ok(());
        };
        let prompt = "Tom and Sue went to the park";
        let base = SamplingParams { seed: Some(9), ..base };
        stories_run(&mut model, prompt, &base, None);
        let changed = nudge(&base, which, amount);
        let rerun = stories_run(&mut model, prompt, &changed, None);
        let fresh = stories_fresh(&mut model, prompt, &changed);
        assert_same_run(&rerun, &fresh, &format!("{changed:?}"));
    }
}

/// Each model keeps its own store: the same prompt and seed on another model replays nothing
/// of the first model's run.
#[test]
fn another_model_replays_nothing_of_the_first() {
    let Some(mut stories) = common::loaded_test_model() else {
        return;
    };
    let hub = samplab::model::source::HubSettings::from_env();
    let name = samplab::model::source::embedded::NAME;
    let mut tiny =
        samplab::engine::load::load_model(name, &hub, DeviceChoice::Cpu, &mut |_| {}).unwrap();
    let params = SamplingParams::from_yaml("seed: 4\nmax_tokens: 12\nnum_samples: 2").unwrap();
    stories_run(&mut stories, "Once upon a time", &params, None);
    let first = stories_run(&mut tiny, "Once upon a time", &params, None);
    assert_eq!(first.timings.tokens_replayed, 0);
    assert_eq!(first.timings.prefill_tokens, first.prompt_token_ids.len());
    let again = stories_run(&mut stories, "Once upon a time", &params, None);
    assert_eq!(
        again.timings.tokens_decoded, 0,
        "stories' own store still serves it"
    );
}

/// The inspector's trace replays a finished sample's kept logits up to the asked step and runs
/// the chain there: it starts at the model's raw probability of each traced token, ends at the
/// chosen one's place in the final distribution, and refuses a step whose tokens changed.
#[test]
fn a_finished_sample_can_be_traced_step_by_step() {
    let mut fake = Fake::new(64 << 20);
    let params = SamplingParams {
        num_samples: 2,
        max_tokens: Some(12),
        seed: Some(SEED),
        temperature: 0.9,
        top_p: 0.8,
        repetition_penalty: 1.3,
        ..Default::default()
    };
    let response = fake.run(&PROMPT, &params);
    let sample = &response.trajectories[1];
    for step in [0, 5, sample.token_ids.len() - 1] {
        let chosen = sample.token_ids[step];
        let other = (chosen + 1) % VOCAB.len() as u32;
        let request = common::trace_request(sample, step, &params, vec![chosen, other]);
        let stages = trace(
            &fake.store,
            &fake.tokenizer,
            &[EOS],
            VOCAB.len(),
            None,
            &request,
        )
        .unwrap();
        assert_eq!(stages[0].stage, "model");
        let raw = stages[0].tokens[0].unwrap().1;
        assert!(
            (f64::from(raw).ln() - f64::from(sample.logprobs[step])).abs() < 1e-4,
            "step {step}: the model stage is the raw probability"
        );
        assert!(
            stages.last().unwrap().tokens[0].is_some(),
            "step {step}: the chosen token survives the chain"
        );
        assert_eq!(stages.last().unwrap().stage, "top_p");
    }
    let mut changed = sample.token_ids[..3].to_vec();
    changed[2] = (changed[2] + 1) % VOCAB.len() as u32;
    let request = TraceRequest {
        run_id: 1,
        sample: 1,
        seed: sample.seed,
        branch: None,
        tokens: changed,
        params,
        ids: vec![0],
    };
    let message = trace(
        &fake.store,
        &fake.tokenizer,
        &[EOS],
        VOCAB.len(),
        None,
        &request,
    )
    .unwrap_err()
    .to_string();
    assert!(message.contains("no longer kept"), "{message}");
}

/// A branch of sample `sample` that takes `path` and then samples on.
fn branch(sample: u32, parent: u32, path: &[u32], then: Option<u32>) -> Branch {
    Branch {
        sample,
        origin: BranchOrigin {
            parent,
            at: path.len().saturating_sub(1) as u32,
        },
        path: path.to_vec(),
        then,
    }
}

/// What a branch must be by definition: the fake model's logits after each token so far, the
/// path forced and the rest drawn, all from sample `sample`'s own stream.
fn branch_by_hand(params: &SamplingParams, b: &Branch) -> Vec<u32> {
    let model = FakeModel::new(VOCAB.len(), 4096);
    let mut sampler = Sampler::new(params).unwrap().with_tokens(TokenLists::new(
        &common::piece_tokenizer(VOCAB),
        &[EOS],
        params,
    ));
    let mut state = SampleState::new(SEED, b.sample, &PROMPT, VOCAB.len());
    let mut tokens: Vec<u32> = Vec::new();
    let most = params.max_tokens.unwrap() as usize;
    while tokens.len() < most.max(b.path.len()) {
        let logits = model.logits(&[&PROMPT[..], &tokens].concat());
        let forced = b.path.get(tokens.len()).copied();
        let norm = log_normalizer(&logits).unwrap();
        let token = sampler
            .sample_or_force(&logits, norm, &mut state, forced)
            .unwrap();
        tokens.push(token.id);
        if token.id == EOS {
            break;
        }
    }
    tokens
}

#[test]
fn a_branch_that_takes_its_samples_own_tokens_is_that_sample() {
    let params =
        SamplingParams::from_yaml("temperature: 0.9\nmax_tokens: 24\nnum_samples: 3\nstop: []")
            .unwrap();
    let plain = fresh(&PROMPT, &params);
    let own = &plain.trajectories[1];
    let k = own.token_ids.len() / 2;
    let same = branch(1, 1, &own.token_ids[..=k], None);
    let run = Fake::new(64 << 20).run_branches(&PROMPT, &params, &[same], None);
    assert_eq!(run.trajectories.len(), 4, "three samples and the branch");
    let b = &run.trajectories[3];
    assert_eq!((b.index, b.seed), (3, own.seed));
    assert_eq!(
        b.branch,
        Some(BranchOrigin {
            parent: 1,
            at: k as u32
        })
    );
    assert_eq!(
        b.token_ids, own.token_ids,
        "forcing the drawn tokens changes nothing"
    );
    assert_eq!(b.logprobs, own.logprobs);
    assert_same_run(
        &SampleResponse {
            trajectories: run.trajectories[..3].to_vec(),
            ..run.clone()
        },
        &plain,
        "the samples beside a branch",
    );
}

#[test]
fn a_branch_takes_the_picked_token_and_draws_on_from_its_samples_stream() {
    let params = SamplingParams::from_yaml(
        "temperature: 1.2\ntop_k: 6\nrepetition_penalty: 1.3\nmax_tokens: 20\nnum_samples: 2",
    )
    .unwrap();
    let plain = fresh(&PROMPT, &params);
    let parent = &plain.trajectories[0];
    let k = 5.min(parent.token_ids.len() - 1);
    let mut path = parent.token_ids[..k].to_vec();
    path.push(if parent.token_ids[k] == 9 { 10 } else { 9 });
    let picked = branch(0, 0, &path, None);
    // A branch of that branch, at a later step.
    let mut fake = Fake::new(64 << 20);
    let first = fake.run_branches(&PROMPT, &params, std::slice::from_ref(&picked), None);
    let child_path = [&first.trajectories[2].token_ids[..k + 3], &[11]].concat();
    let child = branch(0, 2, &child_path, None);
    let branches = [picked, child];
    let run = fake.run_branches(&PROMPT, &params, &branches, None);
    for (j, b) in branches.iter().enumerate() {
        let got = &run.trajectories[2 + j];
        assert_eq!(got.token_ids, branch_by_hand(&params, b), "branch {j}");
        assert!(
            got.token_ids.starts_with(&b.path),
            "branch {j} keeps its path"
        );
        assert_eq!(got.logprobs.len(), got.token_ids.len());
    }
    // Replayed after a knob moves, the branches equal a fresh run of them.
    let moved = SamplingParams {
        top_k: 4,
        ..params.clone()
    };
    let again = fake.run_branches(&PROMPT, &moved, &branches, None);
    assert!(again.timings.tokens_replayed > 0, "the branches replayed");
    let cold = Fake::new(0).run_branches(&PROMPT, &moved, &branches, None);
    assert_same_run(&again, &cold, "branches re-run after a change");
}

#[test]
fn a_stepping_branch_samples_one_token_after_its_path_and_the_next_step_decodes_one() {
    let params = SamplingParams::from_yaml("max_tokens: 3\nnum_samples: 1\nstop: []").unwrap();
    let mut fake = Fake::new(64 << 20);
    let mut path = Vec::new();
    for step in 0..6 {
        let b = branch(0, 0, &path, Some(1));
        let decoded = fake.model.decoded;
        let run = fake.run_branches(&PROMPT, &params, std::slice::from_ref(&b), None);
        let got = &run.trajectories[1];
        assert_eq!(
            got.token_ids.len(),
            path.len() + 1,
            "step {step}: one past the path"
        );
        assert!(got.token_ids.starts_with(&path));
        assert_eq!(
            got.token_ids,
            branch_by_hand(
                &SamplingParams {
                    max_tokens: Some(path.len() as u32 + 1),
                    ..params.clone()
                },
                &b
            )
        );
        if step > 1 {
            assert_eq!(
                fake.model.decoded - decoded,
                1,
                "step {step}: one decode step"
            );
        }
        path = got.token_ids.clone();
        if *path.last().unwrap() == EOS {
            break;
        }
    }
}

#[test]
fn branches_that_do_not_fit_the_run_are_refused() {
    let params = SamplingParams::from_yaml("max_tokens: 4\nnum_samples: 2").unwrap();
    let cases = [
        (
            branch(2, 0, &[3], None),
            "follows sample 2 but the run has 2",
        ),
        (branch(0, 2, &[3], None), "names parent 2"),
        (branch(0, 0, &[3, 99], None), "takes token 99"),
        (
            branch(0, 0, &vec![3; 5000], None),
            "the context leaves room",
        ),
    ];
    for (b, want) in cases {
        let ctx = RunContext {
            tokenizer: &common::piece_tokenizer(VOCAB),
            eos_ids: &[EOS],
            model_name: "fake",
            constraint: None,
            record_traces: false,
        };
        let err = generate(
            &mut FakeModel::new(VOCAB.len(), 4096),
            &mut ReplayStore::new(0),
            &ctx,
            1,
            PROMPT.to_vec(),
            &params,
            &[b],
            SEED,
            &mut || false,
            &mut |_| {},
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains(want), "{err}");
    }
}

#[test]
fn a_branch_step_is_traced_with_its_path_forced() {
    let params =
        SamplingParams::from_yaml("temperature: 0.8\nmax_tokens: 12\nnum_samples: 1").unwrap();
    let mut fake = Fake::new(64 << 20);
    let plain = fake.run(&PROMPT, &params);
    let parent = &plain.trajectories[0];
    let mut path = parent.token_ids[..3].to_vec();
    path.push(if parent.token_ids[3] == 9 { 10 } else { 9 });
    let run = fake.run_branches(&PROMPT, &params, &[branch(0, 0, &path, None)], None);
    let b = &run.trajectories[1];
    let step = b.token_ids.len() - 1;
    let request = TraceRequest {
        run_id: 1,
        sample: 1,
        seed: b.seed,
        branch: Some((0, path.len())),
        tokens: b.token_ids[..=step].to_vec(),
        params: params.clone(),
        ids: vec![b.token_ids[step]],
    };
    let stages = trace(
        &fake.store,
        &fake.tokenizer,
        &[EOS],
        VOCAB.len(),
        None,
        &request,
    )
    .unwrap();
    let raw = stages[0].tokens[0].unwrap().1;
    assert!((f64::from(raw).ln() - f64::from(b.logprobs[step])).abs() < 1e-4);
    let unforced = TraceRequest {
        branch: Some((0, 0)),
        ..request
    };
    let err = trace(
        &fake.store,
        &fake.tokenizer,
        &[EOS],
        VOCAB.len(),
        None,
        &unforced,
    )
    .unwrap_err();
    assert!(err.to_string().contains("no longer kept"), "{err}");
}

#[test]
fn a_new_branch_starts_from_its_samples_kept_steps_and_decodes_only_after_its_pick() {
    let params =
        SamplingParams::from_yaml("temperature: 0.9\nmax_tokens: 30\nnum_samples: 2\nstop: []")
            .unwrap();
    let mut fake = Fake::new(64 << 20);
    let plain = fake.run(&PROMPT, &params);
    let parent = &plain.trajectories[1];
    let k = 12.min(parent.token_ids.len() - 2);
    let mut path = parent.token_ids[..k].to_vec();
    path.push(if parent.token_ids[k] == 9 { 10 } else { 9 });
    let branches = [branch(1, 1, &path, None)];
    let decoded = fake.model.decoded;
    let run = fake.run_branches(&PROMPT, &params, &branches, None);
    let b = &run.trajectories[2];
    let after_pick = b.token_ids.len() - (k + 1);
    assert_eq!(
        fake.model.decoded - decoded,
        after_pick,
        "only the tokens after the pick are decoded"
    );
    assert_eq!(run.timings.tokens_decoded as usize, after_pick);
    let cold = Fake::new(0).run_branches(&PROMPT, &params, &branches, None);
    assert_same_run(&run, &cold, "a branch started from its sample's steps");
    // A branch of that branch starts from it in turn.
    let m = ((k + 1 + b.token_ids.len()) / 2).min(b.token_ids.len() - 1);
    let child = [&b.token_ids[..m], &[11]].concat();
    let both = [branches[0].clone(), branch(1, 2, &child, None)];
    let decoded = fake.model.decoded;
    let run = fake.run_branches(&PROMPT, &params, &both, None);
    let c = &run.trajectories[3];
    assert_eq!(fake.model.decoded - decoded, c.token_ids.len() - (m + 1));
    let cold = Fake::new(0).run_branches(&PROMPT, &params, &both, None);
    assert_same_run(&run, &cold, "a branch of a branch");
}

/// On the real model, a branch started from its sample's kept keys and values (a copy of the
/// sample's cache cut at the pick) equals a branch computed from scratch, to the bit.
#[test]
fn stories260k_branches_from_kept_steps_equal_fresh_branches() {
    let Some(mut model) = common::loaded_test_model() else {
        return;
    };
    let prompt = "Once upon a time, there was a little girl named Lily. She loved to play";
    let params =
        SamplingParams::from_yaml("temperature: 0.9\nseed: 5\nmax_tokens: 40\nnum_samples: 3")
            .unwrap();
    let plain = stories_run(&mut model, prompt, &params, None);
    let parent = &plain.trajectories[2];
    let k = parent.token_ids.len() / 2;
    let mut path = parent.token_ids[..k].to_vec();
    path.push(if parent.token_ids[k] == 100 { 101 } else { 100 });
    let branches = [branch(2, 2, &path, None)];
    let run = stories_branches(&mut model, prompt, &params, &branches, None);
    let b = &run.trajectories[3];
    assert!(b.token_ids.starts_with(&path));
    assert_eq!(
        run.timings.tokens_decoded as usize,
        b.token_ids.len() - (k + 1),
        "the branch decoded only after its pick"
    );
    model.replay.clear();
    model.backend.reset();
    let fresh = stories_branches(&mut model, prompt, &params, &branches, None);
    assert_same_run(&run, &fresh, "a branch from kept steps");
}

/// Runs prompt ids on a loaded model, with branches.
fn ids_run(
    model: &mut LoadedModel,
    prompt: &[u32],
    params: &SamplingParams,
    branches: &[Branch],
) -> SampleResponse {
    let seed = params.seed.expect("a seeded run");
    model
        .run_ids(
            1,
            prompt.to_vec(),
            params,
            branches,
            seed,
            &mut || false,
            &mut |_| {},
        )
        .unwrap()
}

/// The same, on a model with nothing kept.
fn ids_fresh(
    model: &mut LoadedModel,
    prompt: &[u32],
    params: &SamplingParams,
    branches: &[Branch],
) -> SampleResponse {
    model.replay.clear();
    model.backend.reset();
    ids_run(model, prompt, params, branches)
}

/// Gemma 3's random-weight fixture, whose windowed layers see 4 positions: a sample's row there
/// keeps only the last few of them, so a re-run that changes a token far back, and a branch
/// from the middle of a sample, cannot cut the kept row that far; they run the sample's tokens
/// again from the prompt's, and still equal fresh runs to the bit.
#[test]
fn windowed_rows_run_again_what_their_window_dropped_and_equal_fresh_runs() {
    let mut model = common::loaded_fixture("gemma3");
    let prompt: Vec<u32> = (0..16u32).map(|i| 4 + (i * 37) % 265).collect();
    let base = SamplingParams::from_yaml(
        "temperature: 1.2\nseed: 3\nmax_tokens: 36\nnum_samples: 3\nlogprobs: 1\nstop: []\n\
         ignore_eos: true",
    )
    .unwrap();
    let first = ids_run(&mut model, &prompt, &base, &[]);
    let mut changed = base.clone();
    changed.set_assignment("presence_penalty=0.3").unwrap();
    let rerun = ids_run(&mut model, &prompt, &changed, &[]);
    // The point of the test: some sample parts from its kept row well before the row's end,
    // past what a window of 4 (and as much room to rewind) keeps.
    let far = first
        .trajectories
        .iter()
        .zip(&rerun.trajectories)
        .any(|(a, b)| {
            let parted = common_prefix(&a.token_ids, &b.token_ids);
            parted > 0 && a.token_ids.len() - parted > 12
        });
    assert!(
        far,
        "no sample parts far enough back to need its tokens run again"
    );
    assert!(rerun.timings.tokens_replayed > 0, "nothing replayed");
    let fresh = ids_fresh(&mut model, &prompt, &changed, &[]);
    assert_same_run(&rerun, &fresh, "a re-run parting far back");

    ids_run(&mut model, &prompt, &base, &[]);
    let parent = &first.trajectories[1];
    let k = parent.token_ids.len() / 3;
    let mut path = parent.token_ids[..k].to_vec();
    path.push(if parent.token_ids[k] == 260 { 261 } else { 260 });
    let branches = [branch(1, 1, &path, None)];
    let run = ids_run(&mut model, &prompt, &base, &branches);
    assert_eq!(run.trajectories[..3], first.trajectories[..3]);
    let fresh = ids_fresh(&mut model, &prompt, &base, &branches);
    assert_same_run(&run, &fresh, "a branch from a third of the way");
}
