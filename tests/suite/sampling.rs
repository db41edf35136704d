//! The sampling pipeline against docs/sampling.md: hand-worked references, a naive f64 reference
//! implementation, properties, and a statistical check of the draws.

use proptest::prelude::*;
use samplab::params::SamplingParams;
use samplab::sampling::{KeptToken, SampleRng, SampleState, SampledToken, Sampler, SamplingError};

fn params(edit: impl FnOnce(&mut SamplingParams)) -> SamplingParams {
    let mut params = SamplingParams::default();
    edit(&mut params);
    params
}

fn sampler(params: &SamplingParams) -> Sampler {
    Sampler::new(params).expect("test params are valid")
}

fn distribution(params: &SamplingParams, logits: &[f32], prompt: &[u32]) -> Vec<KeptToken> {
    let state = SampleState::new(0, 0, prompt, logits.len());
    sampler(params).distribution(logits, &state).unwrap()
}

fn ids(kept: &[KeptToken]) -> Vec<u32> {
    kept.iter().map(|t| t.id).collect()
}

fn assert_close(got: f32, want: f64, tolerance: f64) {
    assert!(
        (f64::from(got) - want).abs() <= tolerance,
        "got {got}, want {want} ± {tolerance}"
    );
}

/// vLLM's pipeline (docs/sampling.md) written the slow, obvious way in f64: full sort, no
/// shortcuts.
/// Returns the kept tokens in draw order with their renormalised probabilities.
fn reference(logits: &[f32], prompt: &[u32], params: &SamplingParams) -> Vec<(u32, f64)> {
    let mut values: Vec<f64> = logits
        .iter()
        .map(|&x| {
            if x.is_nan() {
                f64::NEG_INFINITY
            } else {
                f64::from(x)
            }
        })
        .collect();
    let mut seen = prompt.to_vec();
    seen.sort_unstable();
    seen.dedup();
    let penalty = f64::from(params.repetition_penalty);
    for id in seen {
        let v = &mut values[id as usize];
        *v = if *v > 0.0 { *v / penalty } else { *v * penalty };
    }
    let mut order: Vec<u32> = (0..values.len() as u32).collect();
    order.sort_by(|&a, &b| {
        values[b as usize]
            .total_cmp(&values[a as usize])
            .then(a.cmp(&b))
    });
    if params.is_greedy() {
        return vec![(order[0], 1.0)];
    }
    let top = values[order[0] as usize];
    let temperature = f64::from(params.temperature);
    let relative = |id: u32| ((values[id as usize] - top) / temperature).exp();
    let kth = params
        .top_k_limit()
        .filter(|&k| k < values.len())
        .map_or(f64::NEG_INFINITY, |k| values[order[k - 1] as usize]);
    let survivors: Vec<u32> = order
        .into_iter()
        .filter(|&id| relative(id) >= f64::from(params.min_p))
        .filter(|&id| values[id as usize] >= kth)
        // The sampler's documented underflow: weights below e^-87 of the best are 0.
        .filter(|&id| relative(id) >= (-87.0f64).exp())
        .collect();
    let total: f64 = survivors.iter().map(|&id| relative(id)).sum();
    let mut kept = Vec::new();
    let mut mass = 0.0;
    for id in survivors {
        kept.push(id);
        mass += relative(id);
        if params.top_p < 1.0 && mass >= f64::from(params.top_p) * total {
            break;
        }
    }
    kept.into_iter()
        .map(|id| (id, relative(id) / mass))
        .collect()
}

fn assert_matches_reference(logits: &[f32], prompt: &[u32], params: &SamplingParams) {
    let got = distribution(params, logits, prompt);
    let want = reference(logits, prompt, params);
    let want_ids: Vec<u32> = want.iter().map(|&(id, _)| id).collect();
    assert_eq!(ids(&got), want_ids, "kept tokens for {params:?}");
    for (token, &(_, prob)) in got.iter().zip(&want) {
        assert_close(token.prob, prob, 1e-5);
    }
}

// ---- hand-worked references ----

#[test]
fn repetition_penalty_divides_positive_and_multiplies_negative_logits() {
    // Prompt [0, 1, 0] is the set {0, 1}; penalty 2 turns [2, -1, 0.5, 3] into [1, -2, 0.5, 3]
    // (0 is penalised once, not twice). softmax([1, -2, 0.5, 3]):
    // e^1 = 2.718282, e^-2 = 0.135335, e^0.5 = 1.648721, e^3 = 20.085537, sum 24.587875.
    let p = params(|p| p.repetition_penalty = 2.0);
    let kept = distribution(&p, &[2.0, -1.0, 0.5, 3.0], &[0, 1, 0]);
    assert_eq!(ids(&kept), [3, 0, 2, 1]);
    for (token, want) in kept.iter().zip([0.816888, 0.110554, 0.067054, 0.005504]) {
        assert_close(token.prob, want, 1e-6);
    }
}

#[test]
fn repetition_penalty_changes_the_greedy_choice() {
    let greedy = |penalty: f32, logits: &[f32]| {
        let p = params(|p| {
            p.temperature = 0.0;
            p.repetition_penalty = penalty;
        });
        ids(&distribution(&p, logits, &[0]))
    };
    // 2 / 2 = 1 < 1.5.
    assert_eq!(greedy(2.0, &[2.0, 1.5]), [1]);
    // -1 * 2 = -2 < -1.5: a negative logit is pushed down, not up.
    assert_eq!(greedy(2.0, &[-1.0, -1.5]), [1]);
    // A penalty below 1 favours repeats: -1 * 0.5 = -0.5 > -0.8.
    assert_eq!(greedy(0.5, &[-1.0, -0.8]), [0]);
    assert_eq!(greedy(1.0, &[2.0, 1.5]), [0]);
}

#[test]
fn generated_tokens_join_the_penalised_set() {
    let p = params(|p| {
        p.temperature = 0.0;
        p.repetition_penalty = 10.0;
    });
    let mut sampler = sampler(&p);
    let mut state = SampleState::new(1, 0, &[], 3);
    let logits = [1.0, 1.0, 0.05];
    let chosen: Vec<u32> = (0..3)
        .map(|_| sampler.sample(&logits, &mut state).unwrap().id)
        .collect();
    // Step 2 sees 0 at 0.1; step 3 sees 0 and 1 at 0.1 and ties to the lower id.
    assert_eq!(chosen, [0, 1, 0]);
}

/// Ten logits, shuffled so that id order differs from probability order.
const TEN: [f32; 10] = [1.0, 3.0, -0.5, 2.0, 0.0, 2.5, -2.0, 1.5, 0.5, -1.0];

fn ten_params() -> SamplingParams {
    params(|p| {
        p.temperature = 0.5;
        p.top_k = 5;
        p.top_p = 0.9;
    })
}

#[test]
fn temperature_then_top_k_then_top_p_on_ten_tokens() {
    // Temperature 0.5 doubles the logits. top_k 5 keeps logits 3, 2.5, 2, 1.5, 1 (ids 1, 5, 3,
    // 7, 0), weighing e^(2(l - 3)) = 1, e^-1, e^-2, e^-3, e^-4, sum 1.57131743, so
    // p = 0.636409, 0.234122, 0.086129, 0.031685, 0.011656 with running sums 0.636409,
    // 0.870530, 0.956659: top_p 0.9 keeps the first three. Renormalised by
    // 1 + e^-1 + e^-2 = 1.50321472: 0.665241, 0.244728, 0.090031.
    let kept = distribution(&ten_params(), &TEN, &[]);
    assert_eq!(ids(&kept), [1, 5, 3]);
    for (token, want) in kept.iter().zip([0.665241, 0.244728, 0.090031]) {
        assert_close(token.prob, want, 1e-6);
    }
    assert_matches_reference(&TEN, &[], &ten_params());
}

#[test]
fn draws_follow_the_inverse_cdf_in_probability_order() {
    // Cumulative kept mass from the test above: 0.665241 (id 1), 0.909969 (id 5), 1 (id 3).
    let mut sampler = sampler(&ten_params());
    for seed in 0..200 {
        let u = SampleRng::new(seed).uniform();
        let want = if u < 0.665241 {
            1
        } else if u < 0.909969 {
            5
        } else {
            3
        };
        if (u - 0.665241).abs() < 1e-5 || (u - 0.909969).abs() < 1e-5 {
            continue;
        }
        let mut state = SampleState::new(seed, 0, &[], TEN.len());
        assert_eq!(
            sampler.sample(&TEN, &mut state).unwrap().id,
            want,
            "u = {u}"
        );
    }
}

#[test]
fn reports_raw_logprob_rank_and_alternatives() {
    // log Σ e^l over TEN = 3.924258, so the raw logprobs of 3, 2.5, 2 are l - 3.924258.
    let p = params(|p| {
        *p = ten_params();
        p.logprobs = Some(4);
    });
    let mut sampler = sampler(&p);
    let mut found_second = false;
    for seed in 0..50 {
        let mut state = SampleState::new(seed, 0, &[], TEN.len());
        let token: SampledToken = sampler.sample(&TEN, &mut state).unwrap();
        let top = &token.top;
        assert_eq!(top.iter().map(|a| a.id).collect::<Vec<_>>(), [1, 5, 3, 7]);
        assert_close(top[0].logprob, -0.924258, 1e-5);
        assert_close(top[1].logprob, -1.424258, 1e-5);
        assert_close(top[1].prob, 0.244728, 1e-6);
        // id 7 (logit 1.5) survives top_k but not top_p: reported, with processed prob 0.
        assert_eq!(top[3].prob, 0.0);
        if token.id == 5 {
            found_second = true;
            assert_eq!(token.rank, 2);
            assert_close(token.logprob, -1.424258, 1e-5);
            assert_close(token.prob, 0.244728, 1e-6);
        }
    }
    assert!(found_second, "50 draws at p = 0.24 never chose id 5");
}

#[test]
fn zero_logprobs_reports_the_chosen_token_only() {
    let p = params(|p| p.logprobs = Some(0));
    let mut state = SampleState::new(3, 0, &[], TEN.len());
    let token = sampler(&p).sample(&TEN, &mut state).unwrap();
    assert_eq!(token.top.len(), 1);
    assert_eq!(token.top[0].id, token.id);
    assert_eq!(token.top[0].logprob, token.logprob);
    let none = sampler(&SamplingParams::default())
        .sample(&TEN, &mut state)
        .unwrap();
    assert!(none.top.is_empty());
}

#[test]
fn min_p_drops_tokens_below_a_share_of_the_best_after_temperature() {
    // At T = 1 the probabilities relative to the best are e^0, e^-1 = 0.368, e^-2 = 0.135,
    // e^-3 = 0.0498: min_p 0.1 drops the last. Renormalised by 1 + e^-1 + e^-2 = 1.503215.
    let logits = [0.0, -1.0, -2.0, -3.0];
    let p = params(|p| p.min_p = 0.1);
    let kept = distribution(&p, &logits, &[]);
    assert_eq!(ids(&kept), [0, 1, 2]);
    for (token, want) in kept.iter().zip([0.665241, 0.244728, 0.090031]) {
        assert_close(token.prob, want, 1e-6);
    }
    // At T = 2 the last is e^-1.5 = 0.223 of the best and survives.
    let hot = params(|p| {
        p.min_p = 0.1;
        p.temperature = 2.0;
    });
    assert_eq!(ids(&distribution(&hot, &logits, &[])), [0, 1, 2, 3]);
    // min_p 1 keeps only the best (and its ties).
    let strict = params(|p| p.min_p = 1.0);
    assert_eq!(ids(&distribution(&strict, &[0.5, 1.0, 1.0], &[])), [1, 2]);
}

#[test]
fn top_k_keeps_every_tie_at_the_boundary() {
    let p = params(|p| p.top_k = 2);
    let kept = distribution(&p, &[1.0, 2.0, 1.0, 0.0, 1.0], &[]);
    assert_eq!(ids(&kept), [1, 0, 2, 4]);
}

#[test]
fn long_tails_below_every_mass_level_are_still_exact() {
    // One token at 0 and 100,000 at -13: the tail holds 100000·e^-13 = 0.226 of 1.226, so the
    // nucleus of 0.9 reaches into the tail, below every precomputed mass level.
    let mut logits = vec![-13.0f32; 100_001];
    logits[500] = 0.0;
    for top_p in [0.9, 0.999] {
        let p = params(|p| p.top_p = top_p);
        assert_matches_reference(&logits, &[], &p);
    }
    let mut sampler = sampler(&SamplingParams::default());
    let mut state = SampleState::new(9, 0, &[], logits.len());
    let tail = (0..400)
        .filter(|_| sampler.sample(&logits, &mut state).unwrap().id != 500)
        .count();
    // 400 draws at 0.184 each: the tail is chosen 74 times on average.
    assert!((30..130).contains(&tail), "{tail} draws from the tail");
}

// ---- masked and broken logits ----

#[test]
fn a_single_finite_logit_is_always_chosen() {
    let mut logits = vec![f32::NEG_INFINITY; 64];
    logits[3] = -50.0;
    for p in [
        SamplingParams::default(),
        params(|p| p.temperature = 0.0),
        params(|p| p.temperature = 100.0),
        params(|p| {
            p.top_k = 10;
            p.top_p = 0.5;
            p.min_p = 0.5;
        }),
        params(|p| p.top_p = 0.3),
    ] {
        let mut sampler = sampler(&p);
        for seed in 0..50 {
            let mut state = SampleState::new(seed, 0, &[], logits.len());
            let token = sampler.sample(&logits, &mut state).unwrap();
            assert_eq!(token.id, 3, "{p:?}");
            assert_eq!(token.prob, 1.0);
            assert_eq!(token.logprob, 0.0);
            assert_eq!(token.rank, 1);
        }
    }
}

#[test]
fn masked_tokens_are_never_chosen() {
    // Every other token is masked; a high temperature flattens the rest, and top_k 100 asks for
    // more tokens than are finite.
    let logits: Vec<f32> = (0..100)
        .map(|i| {
            if i % 2 == 0 {
                f32::NEG_INFINITY
            } else {
                (i % 7) as f32
            }
        })
        .collect();
    for p in [
        params(|p| p.temperature = 50.0),
        params(|p| {
            p.temperature = 50.0;
            p.top_k = 100;
        }),
        params(|p| {
            p.temperature = 50.0;
            p.top_k = 99;
            p.top_p = 0.999;
        }),
    ] {
        let mut sampler = sampler(&p);
        let mut state = SampleState::new(5, 0, &[], logits.len());
        for _ in 0..500 {
            let id = sampler.sample(&logits, &mut state).unwrap().id;
            assert!(id % 2 == 1, "chose masked token {id} with {p:?}");
        }
    }
}

/// Decision: a NaN logit is a masked token (as if -inf) — never chosen, logprob -inf, no panic.
/// +inf is read as the largest finite value, so +inf tokens share the probability.
#[test]
fn nan_logits_are_masked_and_infinite_ones_share_the_mass() {
    let logits = [f32::NAN, 1.0, f32::NAN, 0.5];
    let p = params(|p| p.logprobs = Some(4));
    let mut sampler = sampler(&p);
    let mut state = SampleState::new(11, 0, &[], logits.len());
    let norm = (1f64.exp() + 0.5f64.exp()).ln();
    for _ in 0..200 {
        let token = sampler.sample(&logits, &mut state).unwrap();
        assert!(token.id == 1 || token.id == 3);
        let want = if token.id == 1 { 1.0 } else { 0.5 } - norm;
        assert_close(token.logprob, want, 1e-6);
        let top = token.top;
        assert_eq!(top.iter().map(|a| a.id).collect::<Vec<_>>(), [1, 3, 0, 2]);
        assert_eq!(top[2].logprob, f32::NEG_INFINITY);
        assert_eq!(top[2].prob, 0.0);
    }
    let greedy = params(|p| p.temperature = 0.0);
    assert_eq!(ids(&distribution(&greedy, &logits, &[])), [1]);

    let infinite = [0.0, f32::INFINITY, 1.0, f32::INFINITY];
    let kept = distribution(&SamplingParams::default(), &infinite, &[]);
    assert_eq!(ids(&kept), [1, 3]);
    assert_close(kept[0].prob, 0.5, 1e-6);
}

#[test]
fn logits_with_no_usable_token_are_an_error() {
    let mut sampler = sampler(&SamplingParams::default());
    let mut state = SampleState::new(0, 0, &[], 4);
    for logits in [
        vec![f32::NEG_INFINITY; 4],
        vec![f32::NAN; 4],
        vec![f32::NAN, f32::NEG_INFINITY, f32::NAN, f32::NEG_INFINITY],
        vec![],
    ] {
        assert_eq!(
            sampler.sample(&logits, &mut state),
            Err(SamplingError::NoCandidates)
        );
    }
}

// ---- coupling ----

#[test]
fn greedy_steps_consume_exactly_one_uniform() {
    // 1024 equal logits at T = 1 weigh 1 each, so the draw at u picks token floor(1024·u)
    // exactly: each random step reveals which uniform it used.
    let logits = vec![0.0f32; 1024];
    let mut random = sampler(&SamplingParams::default());
    let mut greedy = sampler(&params(|p| p.temperature = 0.0));
    let mut state = SampleState::new(77, 0, &[], logits.len());
    let mut rng = SampleRng::new(77);
    for step in 0..40 {
        let u = rng.uniform();
        if step % 3 == 0 {
            let token = random.sample(&logits, &mut state).unwrap();
            assert_eq!(token.id, (u * 1024.0) as u32, "step {step}");
        } else {
            // Ties go to the lowest id.
            assert_eq!(greedy.sample(&logits, &mut state).unwrap().id, 0);
        }
    }
}

#[test]
fn a_small_temperature_change_keeps_most_tokens() {
    // Logits -0.5·j for 50 tokens, ids shuffled. Inverse CDFs at T = 1 and 1.02 agree on 96%
    // of [0, 1), so about 192 of 200 coupled steps agree (sd 2.8); two independent streams
    // would agree on Σp² ≈ 24% of steps.
    let logits: Vec<f32> = (0..50).map(|i| ((i * 7) % 50) as f32 * -0.5).collect();
    let run = |temperature: f32| {
        let mut sampler = sampler(&params(|p| p.temperature = temperature));
        let mut state = SampleState::new(42, 0, &[], logits.len());
        (0..200)
            .map(|_| sampler.sample(&logits, &mut state).unwrap().id)
            .collect::<Vec<_>>()
    };
    let (a, b) = (run(1.0), run(1.02));
    let same = a.iter().zip(&b).filter(|(x, y)| x == y).count();
    assert!(same > 170, "only {same} of 200 tokens kept");
}

// ---- statistics ----

#[test]
fn draws_match_the_processed_distribution() {
    // T 0.7, top_k 6, top_p 0.95, min_p 0.02 and penalty 1.3 over prompt {1, 4} leave several
    // tokens of at least 1% each and filter the rest.
    let logits = [2.0, 2.4, 1.1, 0.3, 1.9, -0.5, 0.8, 1.5, -3.0, 1.0];
    let prompt = [1, 4, 1];
    let p = params(|p| {
        p.temperature = 0.7;
        p.top_k = 6;
        p.top_p = 0.95;
        p.min_p = 0.02;
        p.repetition_penalty = 1.3;
    });
    let want = reference(&logits, &prompt, &p);
    assert!(want.len() >= 4 && want.iter().all(|&(_, q)| q > 0.01));
    assert_matches_reference(&logits, &prompt, &p);

    let n = 20_000;
    let mut sampler = sampler(&p);
    let mut counts = [0u32; 10];
    for i in 0..n {
        let mut state = SampleState::new(2024, i, &prompt, logits.len());
        counts[sampler.sample(&logits, &mut state).unwrap().id as usize] += 1;
    }
    // Each count is Binomial(n, q). Bernstein's inequality bounds a deviation of t by
    // 2·exp(-t² / (2(n·q(1-q) + t/3))) for any seed; we allow the t at which that is
    // δ / 10 with δ = 1e-9, so by the union bound over the 10 tokens a correct sampler fails
    // with probability below 1e-9. With n q(1-q) ≈ 4000 the bound is about ±400 draws (2% of
    // n), so a token off by a few percent of probability still fails.
    let level = (2.0 * 10.0 / 1e-9f64).ln();
    for id in 0..10u32 {
        let q = want
            .iter()
            .find(|&&(k, _)| k == id)
            .map_or(0.0, |&(_, q)| q);
        let expected = f64::from(n) * q;
        let variance = expected * (1.0 - q);
        let bound = level / 3.0 + (level * level / 9.0 + 2.0 * level * variance).sqrt();
        let got = f64::from(counts[id as usize]);
        assert!(
            (got - expected).abs() <= bound,
            "token {id}: {got} draws, expected {expected:.0} ± {bound:.0}"
        );
        if q == 0.0 {
            assert_eq!(got, 0.0, "filtered token {id} was drawn");
        }
    }
}

// ---- prompt scoring ----

#[test]
fn prompt_tokens_are_scored_on_raw_logits() {
    // Scoring ignores the sampling params: raw logits, no penalty, no temperature.
    let mut sampler = sampler(&params(|p| {
        *p = ten_params();
        p.repetition_penalty = 3.0;
    }));
    let scored = sampler.score(&TEN, 5, 2).unwrap();
    assert_close(scored.logprob, -1.424258, 1e-5);
    assert_eq!(scored.rank, 2);
    assert_eq!(scored.top.iter().map(|t| t.id).collect::<Vec<_>>(), [1, 5]);
    let unlisted = sampler.score(&TEN, 6, 1).unwrap();
    assert_eq!(
        unlisted.top.iter().map(|t| t.id).collect::<Vec<_>>(),
        [1, 6]
    );
    assert_eq!(unlisted.rank, 10);
}

// ---- properties ----

fn tie_prone_logits(max_len: usize) -> impl Strategy<Value = Vec<f32>> {
    prop::collection::vec((-16i32..16).prop_map(|x| x as f32 * 0.5), 1..max_len)
}

fn any_params() -> impl Strategy<Value = SamplingParams> {
    (
        prop_oneof![Just(0.0f32), 0.1f32..3.0],
        prop_oneof![Just(-1i32), 1i32..30],
        prop_oneof![Just(1.0f32), 0.05f32..1.0],
        prop_oneof![Just(0.0f32), 0.0f32..0.5],
        prop_oneof![Just(1.0f32), 0.5f32..2.0],
    )
        .prop_map(|(temperature, top_k, top_p, min_p, repetition_penalty)| {
            params(|p| {
                p.temperature = temperature;
                p.top_k = top_k;
                p.top_p = top_p;
                p.min_p = min_p;
                p.repetition_penalty = repetition_penalty;
            })
        })
}

proptest! {
    #[test]
    fn top_k_exceeds_k_only_at_ties(logits in tie_prone_logits(60), k in 1i32..70) {
        let kept = distribution(&params(|p| p.top_k = k), &logits, &[]);
        let k = k as usize;
        prop_assert!(!kept.is_empty());
        let mut sorted = logits.clone();
        sorted.sort_by(|a, b| b.total_cmp(a));
        let kth = sorted[k.min(logits.len()) - 1];
        let want: Vec<usize> = (0..logits.len()).filter(|&i| logits[i] >= kth).collect();
        prop_assert_eq!(kept.len(), want.len());
        if kept.len() > k {
            let last = logits[kept[kept.len() - 1].id as usize];
            let ties = logits.iter().filter(|&&x| x == last).count();
            prop_assert!(kept.len() - k < ties, "{} kept for k = {}", kept.len(), k);
        }
    }

    #[test]
    fn top_p_keeps_the_smallest_prefix_reaching_p(
        logits in prop::collection::vec(-10.0f32..10.0, 1..3000),
        top_p in 0.01f32..1.0,
    ) {
        let kept = distribution(&params(|p| p.top_p = top_p), &logits, &[]);
        let top = logits.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(f64::from(x)));
        let total: f64 = logits.iter().map(|&x| (f64::from(x) - top).exp()).sum();
        let prob = |id: u32| (f64::from(logits[id as usize]) - top).exp() / total;
        let mass: f64 = kept.iter().map(|t| prob(t.id)).sum();
        let least = prob(kept[kept.len() - 1].id);
        prop_assert!(mass >= f64::from(top_p) - 1e-5, "kept mass {}", mass);
        prop_assert!(mass - least < f64::from(top_p) + 1e-5, "{} is more than needed", mass);
    }

    #[test]
    fn greedy_is_the_first_argmax(logits in tie_prone_logits(200), seed: u64) {
        let mut sampler = sampler(&params(|p| p.temperature = 0.0));
        let mut state = SampleState::new(seed, 0, &[], logits.len());
        let token = sampler.sample(&logits, &mut state).unwrap();
        let top = logits.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
        let first = logits.iter().position(|&x| x == top).unwrap() as u32;
        prop_assert_eq!(token.id, first);
        prop_assert_eq!(token.prob, 1.0);
    }

    #[test]
    fn pipeline_matches_the_reference(
        logits in prop::collection::vec(-8.0f32..8.0, 1..400),
        prompt in prop::collection::vec(0u32..400, 0..40),
        params in any_params(),
    ) {
        let prompt: Vec<u32> = prompt.into_iter().filter(|&id| (id as usize) < logits.len()).collect();
        assert_matches_reference(&logits, &prompt, &params);
    }

    #[test]
    fn the_same_seed_gives_the_same_tokens(
        logits in prop::collection::vec(-5.0f32..5.0, 2..100),
        params in any_params(),
        seed: u64,
    ) {
        let run = || {
            let mut sampler = sampler(&params);
            let mut state = SampleState::new(seed, 0, &[0], logits.len());
            (0..20).map(|_| sampler.sample(&logits, &mut state).unwrap()).collect::<Vec<_>>()
        };
        prop_assert_eq!(run(), run());
    }

    #[test]
    fn sample_i_of_seed_s_is_sample_0_of_seed_s_plus_i(
        logits in prop::collection::vec(-5.0f32..5.0, 2..100),
        seed: u64,
        index in 0u32..64,
    ) {
        let mut sampler = sampler(&SamplingParams::default());
        let mut a = SampleState::new(seed, index, &[], logits.len());
        let mut b = SampleState::new(seed.wrapping_add(u64::from(index)), 0, &[], logits.len());
        for _ in 0..10 {
            let x = sampler.sample(&logits, &mut a).unwrap();
            let y = sampler.sample(&logits, &mut b).unwrap();
            prop_assert_eq!(x, y);
        }
    }
}

/// A forced token (a branch's pick) still takes its step's uniform, in every engine's chain:
/// the draws after it are the ones the sample itself makes on the same logits, so a branch
/// stays in step with its sample's seed stream.
#[test]
fn a_forced_token_takes_its_steps_uniform_and_reports_its_own_probabilities() {
    let logits: Vec<f32> = (0..12).map(|i| ((i * 7) % 12) as f32 / 3.0).collect();
    for engine in ["vllm", "llama.cpp", "transformers"] {
        let params = SamplingParams::from_yaml(&format!(
            "engine: {engine}\ntemperature: 1.5\ntop_k: 8\nseed: 3"
        ))
        .unwrap();
        let norm = samplab::sampling::log_normalizer(&logits).unwrap();
        let mut own = SampleState::new(3, 0, &[1], logits.len());
        let mut forced = own.clone();
        let mut s = sampler(&params);
        let drawn: Vec<u32> = (0..6)
            .map(|_| s.sample_normalized(&logits, norm, &mut own).unwrap().id)
            .collect();
        // Force at step 0 the token the top_k filter removes (logit rank 12).
        let cut = (0..12u32).min_by(|&a, &b| logits[a as usize].total_cmp(&logits[b as usize]));
        let first = s.sample_or_force(&logits, norm, &mut forced, cut).unwrap();
        assert_eq!(Some(first.id), cut, "{engine}");
        assert_eq!(first.prob, 0.0, "{engine}: top_k removed the forced token");
        assert_eq!(first.rank, 12, "{engine}");
        let rest: Vec<u32> = (1..6)
            .map(|_| s.sample_normalized(&logits, norm, &mut forced).unwrap().id)
            .collect();
        assert_eq!(
            rest,
            drawn[1..],
            "{engine}: the draws after the forced step"
        );
    }
}
