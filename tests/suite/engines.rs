//! Engine profiles against naive f64 references written from each engine's source, stage by
//! stage and in every order; hand-worked cases where the engines disagree; coupling; bad input.

use proptest::prelude::*;
use samplab::params::{Engine, LogitBias, SamplingParams, Stage, Stages};
use samplab::sampling::{KeptToken, SampleState, Sampler};

fn distribution(params: &SamplingParams, logits: &[f32], history: &[u32]) -> Vec<KeptToken> {
    let mut state = SampleState::new(7, 0, &history[..1.min(history.len())], logits.len());
    for &id in history.iter().skip(1) {
        state.accept(id);
    }
    Sampler::new(params)
        .expect("test params are valid")
        .distribution(logits, &state)
        .unwrap()
}

/// Total variation distance between a distribution and a reference given as (id, p).
fn tv(got: &[KeptToken], want: &[(u32, f64)]) -> f64 {
    let mut ids: Vec<u32> = got
        .iter()
        .map(|t| t.id)
        .chain(want.iter().map(|w| w.0))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let p = |id| {
        got.iter()
            .find(|t| t.id == id)
            .map_or(0.0, |t| f64::from(t.prob))
    };
    let q = |id| want.iter().find(|w| w.0 == id).map_or(0.0, |w| w.1);
    ids.into_iter().map(|id| (p(id) - q(id)).abs()).sum::<f64>() / 2.0
}

/// A candidate of the naive references: id, logit.
type Cands = Vec<(u32, f64)>;

fn softmax(c: &Cands) -> Vec<f64> {
    let max = c.iter().map(|x| x.1).fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = c.iter().map(|x| (x.1 - max).exp()).collect();
    let sum: f64 = e.iter().sum();
    e.iter().map(|x| x / sum).collect()
}

fn sort_desc(c: &mut Cands) {
    c.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
}

fn finish(mut c: Cands) -> Vec<(u32, f64)> {
    c.retain(|x| x.1 > f64::NEG_INFINITY);
    let p = softmax(&c);
    c.iter().zip(p).map(|(x, p)| (x.0, p)).collect()
}

thread_local! {
    /// Set when a reference cut a cumulative sum within f32 rounding of its bar: the engines sum
    /// in f32, so either side of the cut is right and the case says nothing.
    static AMBIGUOUS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `cum` against a cumulative bar, noting a sum too close to tell from it in f32.
fn near_bar(cum: f64, bar: f64) -> f64 {
    if (cum - bar).abs() < 1e-5 {
        AMBIGUOUS.with(|a| a.set(true));
    }
    cum
}

/// Whether the last reference made such a cut (and forgets it).
fn was_ambiguous() -> bool {
    AMBIGUOUS.with(|a| a.replace(false))
}

fn repeat(l: f64, penalty: f64) -> f64 {
    if l <= 0.0 { l * penalty } else { l / penalty }
}

/// llama.cpp's chain (src/llama-sampler.cpp), naively, for a history whose XTC coin lands (the
/// references use xtc_probability 1 or 0, so the coin does not matter).
fn llama_cpp_reference(logits: &[f32], history: &[u32], p: &SamplingParams) -> Vec<(u32, f64)> {
    let mut c: Cands = logits
        .iter()
        .enumerate()
        .map(|(i, &l)| (i as u32, f64::from(l)))
        .collect();
    let min_keep = p.min_keep as usize;
    let order = p
        .samplers
        .as_deref()
        .unwrap_or(&Stage::LLAMA_CPP_DEFAULT)
        .to_vec();
    for stage in order {
        match stage {
            Stage::Penalties => {
                let n = if p.repeat_last_n < 0 {
                    history.len()
                } else {
                    (p.repeat_last_n as usize).min(history.len())
                };
                if n == 0 {
                    continue;
                }
                let window = &history[history.len() - n..];
                for x in &mut c {
                    let count = window.iter().filter(|&&t| t == x.0).count();
                    if count > 0 {
                        x.1 = repeat(x.1, f64::from(p.repetition_penalty))
                            - count as f64 * f64::from(p.frequency_penalty)
                            - f64::from(p.presence_penalty);
                    }
                }
            }
            Stage::Dry => {
                if p.dry_multiplier == 0.0 {
                    continue;
                }
                let allowed = p.dry_allowed_length as usize;
                let h = history;
                let n = h.len();
                if n <= allowed {
                    continue;
                }
                for x in &mut c {
                    // The longest suffix of the history that also occurs earlier followed by x.
                    let mut best = 0;
                    for end in 0..n - 1 {
                        if h[end + 1] != x.0 {
                            continue;
                        }
                        let len = (0..=end)
                            .take_while(|&k| h[end - k] == h[n - 1 - k])
                            .count();
                        best = best.max(len.min(n - 1));
                    }
                    if best >= allowed {
                        x.1 -= f64::from(p.dry_multiplier)
                            * f64::from(p.dry_base).powi((best - allowed) as i32);
                    }
                }
            }
            Stage::TopNSigma => {
                if p.top_n_sigma <= 0.0 || c.len() <= 1 {
                    continue;
                }
                let finite: Vec<f64> = c.iter().map(|x| x.1).filter(|l| l.is_finite()).collect();
                let max = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let mean = finite.iter().sum::<f64>() / finite.len() as f64;
                let sd = (finite.iter().map(|l| (l - mean).powi(2)).sum::<f64>()
                    / finite.len() as f64)
                    .sqrt();
                for x in &mut c {
                    if x.1 < max - f64::from(p.top_n_sigma) * sd {
                        x.1 = f64::NEG_INFINITY;
                    }
                }
            }
            Stage::TopK => {
                if let Some(k) = p.top_k_limit() {
                    sort_desc(&mut c);
                    c.truncate(k);
                }
            }
            Stage::TypicalP => {
                if p.typical_p >= 1.0 {
                    continue;
                }
                sort_desc(&mut c);
                let probs = softmax(&c);
                let entropy: f64 = probs
                    .iter()
                    .filter(|&&q| q > 0.0)
                    .map(|q| -q * q.ln())
                    .sum();
                let mut order: Vec<usize> = (0..c.len()).collect();
                order.sort_by(|&a, &b| {
                    ((-probs[a].ln() - entropy).abs()).total_cmp(&(-probs[b].ln() - entropy).abs())
                });
                let mut cum = 0.0;
                let mut last = order.len();
                for (i, &j) in order.iter().enumerate() {
                    cum += probs[j];
                    let bar = f64::from(p.typical_p);
                    if near_bar(cum, bar) > bar && (min_keep == 0 || i + 1 >= min_keep) {
                        last = i + 1;
                        break;
                    }
                }
                c = order[..last].iter().map(|&j| c[j]).collect();
            }
            Stage::TopP => {
                if p.top_p >= 1.0 {
                    continue;
                }
                sort_desc(&mut c);
                let probs = softmax(&c);
                let mut cum = 0.0;
                for (i, q) in probs.iter().enumerate() {
                    cum += q;
                    let bar = f64::from(p.top_p);
                    if near_bar(cum, bar) >= bar && i + 1 >= min_keep {
                        c.truncate(i + 1);
                        break;
                    }
                }
            }
            Stage::MinP => {
                if p.min_p <= 0.0 {
                    continue;
                }
                let max = c.iter().map(|x| x.1).fold(f64::NEG_INFINITY, f64::max);
                let bar = max + f64::from(p.min_p).ln();
                if c.iter().filter(|x| x.1 >= bar).count() >= min_keep.max(1) {
                    c.retain(|x| x.1 >= bar);
                } else {
                    sort_desc(&mut c);
                    let keep = (1..c.len()).find(|&i| c[i].1 < bar && i >= min_keep);
                    c.truncate(keep.unwrap_or(c.len()));
                }
            }
            Stage::Xtc => {
                if p.xtc_probability <= 0.0 || p.xtc_threshold > 0.5 || c.len() < 2 {
                    continue;
                }
                sort_desc(&mut c);
                let probs = softmax(&c);
                let above = probs
                    .iter()
                    .take_while(|&&q| q >= f64::from(p.xtc_threshold))
                    .count();
                let pos_last = above.saturating_sub(1);
                if c.len() - pos_last >= min_keep && pos_last > 0 {
                    c.drain(..pos_last);
                }
            }
            Stage::Temperature => {
                let t = f64::from(p.temperature);
                let t = if p.dynatemp_range > 0.0 && c.len() > 1 {
                    let (lo, hi) = (
                        (t - f64::from(p.dynatemp_range)).max(0.0),
                        t + f64::from(p.dynatemp_range),
                    );
                    let probs = softmax(&c);
                    let entropy: f64 = probs
                        .iter()
                        .filter(|&&q| q > 0.0)
                        .map(|q| -q * q.ln())
                        .sum();
                    let norm = entropy / (c.len() as f64).ln();
                    lo + (hi - lo) * norm.powf(f64::from(p.dynatemp_exponent))
                } else {
                    t
                };
                if t <= 0.0 {
                    sort_desc(&mut c);
                    c.truncate(1);
                } else {
                    c.iter_mut().for_each(|x| x.1 /= t);
                }
            }
            // It runs last, below, wherever the order names it.
            Stage::AdaptiveP => {}
        }
    }
    if p.adaptive_target >= 0.0 {
        // adaptive-p's first step, where its average sits at the target: logits
        // 5 - 10 d^2 / (1 + d) for d = |p - target| / 0.3.
        let probs = softmax(&c);
        for (x, q) in c.iter_mut().zip(probs) {
            if x.1 > f64::NEG_INFINITY {
                let d = (q - f64::from(p.adaptive_target)).abs() / 0.3;
                x.1 = 5.0 - 10.0 * d * d / (1.0 + d);
            }
        }
    }
    finish(c)
}

/// transformers' processors and warpers (generation/logits_process.py), naively.
fn transformers_reference(logits: &[f32], history: &[u32], p: &SamplingParams) -> Vec<(u32, f64)> {
    let mut c: Cands = logits
        .iter()
        .enumerate()
        .map(|(i, &l)| (i as u32, f64::from(l)))
        .collect();
    for x in &mut c {
        if history.contains(&x.0) {
            x.1 = repeat(x.1, f64::from(p.repetition_penalty));
        }
    }
    c.iter_mut().for_each(|x| x.1 /= f64::from(p.temperature));
    sort_desc(&mut c);
    if let Some(top_h) = p.top_h {
        top_h_reference(&mut c, f64::from(top_h));
    }
    if let Some(k) = p.top_k_limit().filter(|&k| k < c.len()) {
        let edge = c[k - 1].1;
        c.retain(|x| x.1 >= edge);
    }
    if p.top_p < 1.0 {
        let probs = softmax(&c);
        let mut cum = 0.0;
        let drop = probs
            .iter()
            .rev()
            .take_while(|&&q| {
                cum += q;
                let bar = 1.0 - f64::from(p.top_p);
                near_bar(cum, bar) <= bar
            })
            .count();
        c.truncate((c.len() - drop).max(1));
    }
    if p.min_p > 0.0 {
        let probs = softmax(&c);
        let bar = f64::from(p.min_p) * probs[0];
        c = c
            .iter()
            .zip(&probs)
            .enumerate()
            .filter(|(i, (_, q))| **q >= bar || *i == 0)
            .map(|(_, (x, _))| *x)
            .collect();
    }
    if p.typical_p < 1.0 {
        let probs = softmax(&c);
        let entropy: f64 = probs
            .iter()
            .filter(|&&q| q > 0.0)
            .map(|q| -q * q.ln())
            .sum();
        let scores: Vec<f64> = probs.iter().map(|q| (-q.ln() - entropy).abs()).collect();
        let mut order: Vec<usize> = (0..c.len()).collect();
        order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]).then(c[a].0.cmp(&c[b].0)));
        let mut cum = 0.0;
        let below = order
            .iter()
            .take_while(|&&j| {
                cum += probs[j];
                let bar = f64::from(p.typical_p);
                near_bar(cum, bar) < bar
            })
            .count();
        let edge = scores[order[below.min(order.len() - 1)]];
        // transformers keeps every token scored up to the edge: a score beyond it by less than
        // f32 rounding is a tie to an f32 engine.
        if scores
            .iter()
            .any(|&q| q > edge && q - edge < 1e-6 * edge.max(1.0))
        {
            AMBIGUOUS.with(|a| a.set(true));
        }
        c = order
            .iter()
            .enumerate()
            .filter(|&(i, &j)| scores[j] <= edge || i == 0)
            .map(|(_, &j)| c[j])
            .collect();
    }
    finish(c)
}

/// transformers' TopHLogitsWarper on candidates sorted by logit: the 100 largest, their own
/// softmax, tau = top_h times its entropy, and the prefix whose running sum of -p ln p stays
/// at most tau (the first always kept).
fn top_h_reference(c: &mut Cands, top_h: f64) {
    c.truncate(100);
    let probs = softmax(c);
    let entropy: f64 = probs.iter().map(|q| -q * q.ln()).sum();
    let tau = top_h * entropy;
    let mut cum = 0.0;
    let kept = probs
        .iter()
        .take_while(|&&q| {
            cum += -q * q.ln();
            near_bar(cum, tau) <= tau
        })
        .count();
    c.truncate(kept.max(1));
}

/// Distinct logits (ties make "the k-th" ambiguous between engines' sorts).
fn logits_strategy() -> impl Strategy<Value = Vec<f32>> {
    prop::collection::vec(-6.0f32..6.0, 12..40).prop_map(|mut v| {
        for (i, x) in v.iter_mut().enumerate() {
            *x += i as f32 * 1e-3;
        }
        v
    })
}

fn llama_params() -> impl Strategy<Value = SamplingParams> {
    (
        (
            0.2f32..2.0,
            prop_oneof![Just(-1), 1i32..20],
            0.3f32..1.0,
            0.0f32..0.3,
        ),
        (
            0.3f32..1.0,
            prop_oneof![Just(-1.0f32), 0.5f32..3.0],
            0.9f32..1.6,
            -0.5f32..0.5,
        ),
        (
            prop_oneof![Just(0.0f32), 0.2f32..1.0],
            0.05f32..0.4,
            prop_oneof![Just(0.0f32), 0.1f32..0.8],
            prop_oneof![Just(-1.0f32), 0.0f32..=1.0],
        ),
        (
            0u32..4,
            Just(Stage::LLAMA_CPP_DEFAULT.to_vec()).prop_shuffle(),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (t, k, top_p, min_p),
                (typ, sigma, rep, freq),
                (xtc, xtc_t, dry, adaptive_target),
                (keep, order, custom),
            )| {
                SamplingParams {
                    engine: Engine::LlamaCpp,
                    temperature: t,
                    top_k: k,
                    top_p,
                    min_p,
                    typical_p: typ,
                    top_n_sigma: sigma,
                    repetition_penalty: rep,
                    frequency_penalty: freq,
                    presence_penalty: freq / 2.0,
                    repeat_last_n: 6,
                    xtc_probability: if xtc > 0.0 { 1.0 } else { 0.0 },
                    xtc_threshold: xtc_t,
                    dry_multiplier: dry,
                    dry_allowed_length: 2,
                    min_keep: keep,
                    samplers: custom.then_some(Stages(order)),
                    adaptive_target,
                    ..Default::default()
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Every stage alone and together, in the default order and in shuffled ones, with and
    /// without adaptive-p's first step last, equals the naive reference of llama.cpp's source.
    #[test]
    fn llama_cpp_chain_equals_its_reference(
        logits in logits_strategy(),
        params in llama_params(),
        history in prop::collection::vec(0u32..12, 1..16),
    ) {
        let got = distribution(&params, &logits, &history);
        let want = llama_cpp_reference(&logits, &history, &params);
        prop_assume!(!was_ambiguous());
        prop_assert!(tv(&got, &want) < 1e-4, "tv {} got {:?} want {:?}", tv(&got, &want), got, want);
    }

    #[test]
    fn transformers_chain_equals_its_reference(
        logits in logits_strategy(),
        t in 0.2f32..2.0,
        k in prop_oneof![Just(-1), 1i32..20],
        top_p in 0.3f32..1.0,
        min_p in prop_oneof![Just(0.0f32), 0.01f32..0.3],
        typical_p in prop_oneof![Just(1.0f32), 0.3f32..1.0],
        top_h in prop_oneof![Just(None), (0.05f32..=1.0).prop_map(Some)],
        rep in 0.9f32..1.6,
        history in prop::collection::vec(0u32..12, 1..16),
    ) {
        let params = SamplingParams {
            engine: Engine::Transformers,
            temperature: t,
            top_k: k,
            top_p,
            min_p,
            typical_p,
            top_h,
            repetition_penalty: rep,
            ..Default::default()
        };
        let got = distribution(&params, &logits, &history);
        let want = transformers_reference(&logits, &history, &params);
        prop_assume!(!was_ambiguous());
        prop_assert!(tv(&got, &want) < 1e-4, "tv {} got {:?} want {:?}", tv(&got, &want), got, want);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// top-h alone, on vocabularies below and above the 100 tokens it weighs: the kept set is
    /// transformers' exactly and every probability within 1e-6 of its formula.
    #[test]
    fn top_h_keeps_transformers_set_with_its_probabilities(
        logits in prop::collection::vec(-8.0f32..8.0, 2..300),
        top_h in 0.01f32..=1.0,
    ) {
        let params = SamplingParams {
            engine: Engine::Transformers,
            top_h: Some(top_h),
            ..Default::default()
        };
        let got = distribution(&params, &logits, &[]);
        let want = transformers_reference(&logits, &[], &params);
        prop_assume!(!was_ambiguous());
        let mut got_ids: Vec<u32> = got.iter().map(|t| t.id).collect();
        let mut want_ids: Vec<u32> = want.iter().map(|w| w.0).collect();
        got_ids.sort_unstable();
        want_ids.sort_unstable();
        prop_assert_eq!(got_ids, want_ids);
        for t in &got {
            let p = want.iter().find(|w| w.0 == t.id).unwrap().1;
            prop_assert!((f64::from(t.prob) - p).abs() < 1e-6, "{} vs {p}", t.prob);
        }
        prop_assert!(want.len() <= 100);
    }
}

/// top-h runs after temperature and before top_k, as transformers' warpers do, and keeps at
/// least the likeliest token: at a tiny top_h only it remains, whatever top_k allows.
#[test]
fn top_h_is_a_warper_after_temperature() {
    let params = SamplingParams::from_yaml("engine: transformers\ntop_h: 0.01\ntop_k: 5").unwrap();
    let kept = distribution(&params, &[1.0, 3.0, 2.0, 0.5], &[]);
    assert_eq!(kept.iter().map(|t| t.id).collect::<Vec<_>>(), [1]);
    let names = samplab::sampling::stage_names(&params);
    let at = |name| names.iter().position(|&n| n == name).unwrap();
    assert!(
        at("temperature") < at("top_h") && at("top_h") < at("top_k"),
        "{names:?}"
    );
    let err = SamplingParams::from_yaml("top_h: 0.4").unwrap_err();
    assert!(err.to_string().contains("transformers has it"), "{err}");
    let err = SamplingParams::from_yaml("engine: transformers\ntop_h: 0").unwrap_err();
    assert!(err.to_string().contains("(0, 1]"), "{err}");
}

/// llama.cpp runs adaptive-p last, in place of the final draw, wherever `samplers` names it;
/// samplab runs it whenever its target is set (>= 0), and never under mirostat, which replaces
/// the chain.
#[test]
fn adaptive_p_is_the_last_stage_when_its_target_is_set() {
    let names = |yaml: &str| {
        samplab::sampling::stage_names(&SamplingParams::from_yaml(yaml).unwrap()).join(" ")
    };
    assert_eq!(
        names(
            "engine: llama.cpp\nsamplers: [adaptive_p, top_k, temperature]\nadaptive_target: 0.5"
        ),
        "logit_bias ignore_eos top_k temperature adaptive_p"
    );
    assert_eq!(
        names("engine: llama.cpp\nsamplers: [adaptive_p, top_k, temperature]"),
        "logit_bias ignore_eos top_k temperature",
        "a negative target is off, as in llama.cpp (it then draws as the plain chain does)"
    );
    assert!(names("engine: llama.cpp\nadaptive_target: 0.5").ends_with("temperature adaptive_p"));
    assert_eq!(
        names("engine: llama.cpp\nadaptive_target: 0.5\nmirostat: 2"),
        "logit_bias ignore_eos mirostat"
    );
    for (yaml, field) in [
        ("engine: llama.cpp\nadaptive_target: 1.5", "adaptive_target"),
        ("engine: llama.cpp\nadaptive_target: -2", "adaptive_target"),
        ("engine: llama.cpp\nadaptive_decay: 1", "adaptive_decay"),
        ("adaptive_target: 0.5", "adaptive_target"),
    ] {
        let err = SamplingParams::from_yaml(yaml).unwrap_err().to_string();
        assert!(err.contains(field), "{yaml}: {err}");
    }
}

/// An empirical distribution of `counts` (id as text -> count) against samplab's exact one.
fn tv_counts(counts: &serde_json::Value, want: &[KeptToken]) -> f64 {
    let counts = counts.as_object().unwrap();
    let n: f64 = counts.values().map(|c| c.as_f64().unwrap()).sum();
    let drawn: Vec<(u32, f64)> = counts
        .iter()
        .map(|(id, c)| (id.parse().unwrap(), c.as_f64().unwrap() / n))
        .collect();
    tv(want, &drawn)
}

/// llama.cpp's own adaptive-p chain (min_p, temperature, adaptive_p) through llama-cpp-python
/// (`scripts/llama_adaptive_draws.py`), over 20 steps of the same logits. At every step the
/// tokens of 10,000 runs land within 0.05 total variation of samplab's 10,000 samples; and
/// forced along three of llama.cpp's runs, samplab's exact distribution at every step is within
/// 0.05 of 6,000 draws from the state llama.cpp's run had reached there: its memory replayed
/// exactly, step by step.
#[test]
fn adaptive_p_draws_as_llama_cpps_own_chain_step_by_step() {
    let Some(python) = crate::common::llama_cpp_python() else {
        return;
    };
    let logits: Vec<f32> = (0..40)
        .map(|i| 4.0 - 0.45 * i as f32 + 0.3 * (i as f32 * 1.7).sin())
        .collect();
    let (steps, runs, repeats) = (20, 10_000, 6_000);
    let input = serde_json::json!({
        "logits": logits, "steps": steps, "runs": runs, "paths": 3, "repeats": repeats,
        "min_p": 0.05, "temperature": 0.8, "target": 0.25, "decay": 0.8,
    });
    let mut child = std::process::Command::new(python)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/llama_adaptive_draws.py"
        ))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(
        &mut child.stdin.take().unwrap(),
        input.to_string().as_bytes(),
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let peer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    let params = SamplingParams::from_yaml(
        "engine: llama.cpp\nmin_p: 0.05\ntemperature: 0.8\nadaptive_target: 0.25\n\
         adaptive_decay: 0.8",
    )
    .unwrap();
    let mut sampler = Sampler::new(&params).unwrap();
    let mut ours = vec![vec![0u32; logits.len()]; steps];
    for sample in 0..runs {
        let mut state = SampleState::new(0, sample, &[], logits.len());
        for counts in &mut ours {
            counts[sampler.sample(&logits, &mut state).unwrap().id as usize] += 1;
        }
    }
    let mut worst = 0.0f64;
    for (step, counts) in ours.iter().enumerate() {
        let drawn: Vec<KeptToken> = (0..)
            .zip(counts)
            .filter(|&(_, &n)| n > 0)
            .map(|(id, &n)| KeptToken {
                id,
                prob: n as f32 / runs as f32,
            })
            .collect();
        let d = tv_counts(&peer["marginals"][step], &drawn);
        assert!(
            d < 0.05,
            "step {step}: total variation {d} from llama.cpp's draws"
        );
        worst = worst.max(d);
    }
    eprintln!(
        "adaptive-p, tokens drawn at each of {steps} steps: worst total variation {worst:.4}"
    );

    let norm = samplab::sampling::log_normalizer(&logits).unwrap();
    let mut worst = 0.0f64;
    for path in peer["paths"].as_array().unwrap() {
        let mut state = SampleState::new(0, 0, &[], logits.len());
        for (step, token) in path["tokens"].as_array().unwrap().iter().enumerate() {
            let exact = sampler.distribution(&logits, &state).unwrap();
            let d = tv_counts(&path["conditionals"][step], &exact);
            assert!(d < 0.05, "step {step} of {path}: total variation {d}");
            worst = worst.max(d);
            let token = token.as_u64().unwrap() as u32;
            sampler
                .sample_or_force(&logits, norm, &mut state, Some(token))
                .unwrap();
        }
    }
    eprintln!("adaptive-p, along llama.cpp's runs: worst total variation {worst:.4}");
}

/// llama.cpp issue 7498: min_p before temperature (llama.cpp) removes a token that min_p after
/// temperature (vLLM, transformers) keeps, at the same numbers.
#[test]
fn min_p_means_different_things_before_and_after_temperature() {
    // Probability ratios to the top token at T = 1: 1, 0.08.
    let logits = [0.0, 0.08f32.ln()];
    let base = SamplingParams {
        temperature: 2.0,
        min_p: 0.1,
        ..Default::default()
    };
    let vllm = distribution(&base, &logits, &[]);
    let llama = distribution(
        &SamplingParams {
            engine: Engine::LlamaCpp,
            ..base.clone()
        },
        &logits,
        &[],
    );
    assert_eq!(
        vllm.len(),
        2,
        "after T = 2 the ratio is sqrt(0.08) = 0.28 >= 0.1"
    );
    let kept = 1.0 / (1.0 + 0.08f64.sqrt());
    assert!((f64::from(vllm[0].prob) - kept).abs() < 1e-6);
    assert_eq!(llama.len(), 1, "before temperature the ratio is 0.08 < 0.1");
}

/// transformers cuts top_p on the full distribution, then min_p; vLLM min_p first, then top_p
/// on what is left: the same knobs keep different sets.
#[test]
fn transformers_cuts_top_p_before_min_p() {
    // p = 0.4, 0.3, 0.2, 0.1
    let logits = [0.4f32.ln(), 0.3f32.ln(), 0.2f32.ln(), 0.1f32.ln()];
    let base = SamplingParams {
        top_p: 0.75,
        min_p: 0.3,
        ..Default::default()
    };
    let vllm = distribution(&base, &logits, &[]);
    let hf = distribution(
        &SamplingParams {
            engine: Engine::Transformers,
            ..base
        },
        &logits,
        &[],
    );
    // vLLM: min_p (bar 0.12) keeps 0.4, 0.3, 0.2, renormalised 0.44, 0.33, 0.22, and top_p
    // 0.75 then needs two. transformers: top_p drops only 0.1 (0.3 > 1 - 0.75 from the
    // bottom), min_p keeps the other three.
    assert_eq!(vllm.iter().map(|t| t.id).collect::<Vec<_>>(), [0, 1]);
    assert_eq!(hf.iter().map(|t| t.id).collect::<Vec<_>>(), [0, 1, 2]);
}

/// Hand-worked llama.cpp stages: XTC removes every token above the threshold but the least
/// likely of them; top-n-sigma keeps logits within n standard deviations of the largest.
#[test]
fn xtc_and_top_n_sigma_by_hand() {
    // p = 0.4, 0.3, 0.2, 0.1
    let logits = [0.4f32.ln(), 0.3f32.ln(), 0.2f32.ln(), 0.1f32.ln()];
    let xtc = SamplingParams {
        engine: Engine::LlamaCpp,
        xtc_probability: 1.0,
        xtc_threshold: 0.25,
        ..Default::default()
    };
    let kept = distribution(&xtc, &logits, &[]);
    assert_eq!(kept.iter().map(|t| t.id).collect::<Vec<_>>(), [1, 2, 3]);
    assert!((f64::from(kept[0].prob) - 0.5).abs() < 1e-6);

    let logits = [4.0, 3.0, 0.0, -1.0];
    // mean 1.5, sd = sqrt((6.25 + 2.25 + 2.25 + 6.25) / 4) = 2.06; 4 - 1 * 2.06 = 1.94.
    let sigma = SamplingParams {
        engine: Engine::LlamaCpp,
        top_n_sigma: 1.0,
        ..Default::default()
    };
    let kept = distribution(&sigma, &logits, &[]);
    assert_eq!(kept.iter().map(|t| t.id).collect::<Vec<_>>(), [0, 1]);
}

/// vLLM's new processors by hand: logit bias (clamped), allowed ids, presence and frequency on
/// the output only, min_tokens banning EOS.
#[test]
fn vllm_processors_by_hand() {
    let biased = SamplingParams {
        logit_bias: Some(LogitBias([(1, 2f32.ln()), (2, 1e9)].into())),
        ..Default::default()
    };
    let kept = distribution(&biased, &[0.0, 0.0, -150.0, 0.0], &[]);
    // weights 1, 2, e^-50 (the bias clamped to 100), 1
    assert!((f64::from(kept[0].prob) - 0.5).abs() < 1e-6, "{kept:?}");
    let clamped = kept.iter().find(|t| t.id == 2).unwrap().prob;
    assert!((f64::from(clamped) / ((-50f64).exp() / 4.0) - 1.0).abs() < 1e-3);
    let logits = [0.0f32; 4];
    let allowed = SamplingParams {
        allowed_token_ids: Some(vec![2, 3]),
        ..Default::default()
    };
    let kept = distribution(&allowed, &logits, &[]);
    assert_eq!(kept.iter().map(|t| t.id).collect::<Vec<_>>(), [2, 3]);
    // history: prompt [0], output [1, 1]
    let penalised = SamplingParams {
        frequency_penalty: 0.5,
        presence_penalty: 0.5,
        ..Default::default()
    };
    let kept = distribution(&penalised, &logits, &[0, 1, 1]);
    let p1 = kept.iter().find(|t| t.id == 1).unwrap().prob;
    let p0 = kept.iter().find(|t| t.id == 0).unwrap().prob;
    assert!(
        (f64::from(p1 / p0) - (-1.5f64).exp()).abs() < 1e-6,
        "the prompt's 0 is not penalised"
    );
}

/// Coupled sampling across profiles: nudging one knob by one step changes under 30% of the
/// tokens drawn from the same 64-token logits with the same seed, where a new seed changes
/// over 80% (measured: 0-25% for temperature +0.05, top_p -0.01 and min_p +0.01).
#[test]
fn a_nudge_changes_few_tokens_in_every_profile() {
    let steps = 400;
    let logits: Vec<Vec<f32>> = (0..steps)
        .map(|s| {
            (0..64)
                .map(|i| ((i * 37 + s * 11) % 64) as f32 / 10.0 - (i as f32) / 20.0)
                .collect()
        })
        .collect();
    let draw_seeded = |params: &SamplingParams, seed: u64| -> Vec<u32> {
        let mut sampler = Sampler::new(params).unwrap();
        let mut state = SampleState::new(seed, 0, &[0], 64);
        logits
            .iter()
            .map(|l| sampler.sample(l, &mut state).unwrap().id)
            .collect()
    };
    let draw = |params: &SamplingParams| draw_seeded(params, 3);
    for engine in Engine::ALL {
        let base = SamplingParams {
            engine,
            temperature: 0.8,
            top_p: 0.9,
            min_p: 0.05,
            ..Default::default()
        };
        for nudge in [
            |p: &mut SamplingParams| p.temperature += 0.05,
            |p: &mut SamplingParams| p.top_p -= 0.01,
            |p: &mut SamplingParams| p.min_p += 0.01,
        ] {
            let reseeded = draw_seeded(&base, 4);
            let fresh = draw(&base)
                .iter()
                .zip(&reseeded)
                .filter(|(x, y)| x != y)
                .count();
            assert!(
                fresh * 10 > steps * 8,
                "{engine}: a new seed changed only {fresh}"
            );
            let mut nudged = base.clone();
            nudge(&mut nudged);
            let (a, b) = (draw(&base), draw(&nudged));
            let changed = a.iter().zip(&b).filter(|(x, y)| x != y).count();
            assert!(
                changed * 10 < steps * 3,
                "{engine}: {changed} of {steps} tokens changed"
            );
        }
    }
}

#[test]
fn every_new_field_refuses_a_bad_value_by_name() {
    let cases = [
        ("presence_penalty: 2.5", "presence_penalty"),
        ("frequency_penalty: -3", "frequency_penalty"),
        ("min_tokens: -1", "min_tokens"),
        ("max_tokens: 4\nmin_tokens: 5", "min_tokens"),
        ("ignore_eos: maybe", "ignore_eos"),
        ("logit_bias: {a: 1}", "logit_bias"),
        ("logit_bias: {1: .nan}", "logit_bias"),
        ("bad_words: [\"\"]", "bad_words"),
        ("allowed_token_ids: []", "allowed_token_ids"),
        ("engine: llama.cpp\nrepeat_last_n: -2", "repeat_last_n"),
        ("engine: llama.cpp\ntypical_p: 0", "typical_p"),
        ("engine: llama.cpp\ntop_n_sigma: -3", "top_n_sigma"),
        ("engine: llama.cpp\nxtc_probability: 1.5", "xtc_probability"),
        ("engine: llama.cpp\nxtc_threshold: -0.1", "xtc_threshold"),
        ("engine: llama.cpp\ndry_multiplier: -1", "dry_multiplier"),
        ("engine: llama.cpp\ndry_base: 0.5", "dry_base"),
        (
            "engine: llama.cpp\ndry_allowed_length: 0",
            "dry_allowed_length",
        ),
        (
            "engine: llama.cpp\ndry_penalty_last_n: -5",
            "dry_penalty_last_n",
        ),
        (
            "engine: llama.cpp\ndry_sequence_breakers: [\"\"]",
            "dry_sequence_breakers",
        ),
        ("engine: llama.cpp\nmirostat: 3", "mirostat"),
        ("engine: llama.cpp\nmirostat_tau: -1", "mirostat_tau"),
        ("engine: llama.cpp\nmirostat_eta: .inf", "mirostat_eta"),
        ("engine: llama.cpp\ndynatemp_range: -1", "dynatemp_range"),
        (
            "engine: llama.cpp\ndynatemp_exponent: -1",
            "dynatemp_exponent",
        ),
        ("engine: llama.cpp\nmin_keep: -1", "min_keep"),
        ("engine: sglang", "engine"),
        (
            "engine: llama.cpp\nsamplers: [top_k, nucleus_sampling]",
            "samplers",
        ),
    ];
    for (yaml, field) in cases {
        let message = SamplingParams::from_yaml(yaml).unwrap_err().to_string();
        assert!(
            message.contains(&format!("`{field}`")),
            "{yaml:?}: {message}"
        );
    }
}

#[test]
fn a_parameter_the_engine_lacks_is_refused_with_the_engines_that_have_it() {
    let message = SamplingParams::from_yaml("dry_multiplier: 0.8")
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("`dry_multiplier` is not a vLLM parameter"),
        "{message}"
    );
    assert!(message.contains("llama.cpp"), "{message}");
    let message = SamplingParams::from_yaml("engine: transformers\npresence_penalty: 0.5")
        .unwrap_err()
        .to_string();
    assert!(message.contains("vLLM and llama.cpp"), "{message}");
    let message = SamplingParams::from_yaml("samplers: [top_k]")
        .unwrap_err()
        .to_string();
    assert!(message.contains("`samplers`"), "{message}");
    // At their defaults, parameters of other engines are fine.
    assert!(SamplingParams::from_yaml("engine: transformers\nrepeat_last_n: 64").is_ok());
}

#[test]
fn token_ids_outside_the_vocabulary_are_refused() {
    let params = SamplingParams::from_yaml("logit_bias: {70000: 5}").unwrap();
    let message = params.check_token_ids(1024).unwrap_err().to_string();
    assert!(
        message.contains("70000") && message.contains("1024"),
        "{message}"
    );
    let params = SamplingParams::from_yaml("allowed_token_ids: [3, 5000]").unwrap();
    assert!(params.check_token_ids(1024).is_err());
    assert!(params.check_token_ids(8000).is_ok());
    // A stop token id too, as `#99999` typed in the playground.
    let params = SamplingParams::from_yaml("stop: [\"end\", 99999]").unwrap();
    let message = params.check_token_ids(1024).unwrap_err().to_string();
    assert!(message.contains("`stop` names token 99999"), "{message}");
    assert!(params.check_token_ids(100_000).is_ok());
}

/// The default profile is today's sampler: a vLLM run equals one with every new knob at its
/// default spelled out.
#[test]
fn the_vllm_defaults_sample_as_before() {
    let logits: Vec<f32> = (0..50).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
    let base = SamplingParams {
        temperature: 0.7,
        top_k: 20,
        top_p: 0.9,
        repetition_penalty: 1.2,
        ..Default::default()
    };
    let spelled = SamplingParams::from_yaml(
        "temperature: 0.7\ntop_k: 20\ntop_p: 0.9\nrepetition_penalty: 1.2\nengine: vllm\n\
         presence_penalty: 0\nfrequency_penalty: 0\nmin_tokens: 0\nrepeat_last_n: 64\n\
         typical_p: 1\nmirostat: 0",
    )
    .unwrap();
    assert_eq!(base, spelled);
    let a = distribution(&base, &logits, &[3, 4]);
    let b = distribution(&spelled, &logits, &[3, 4]);
    assert_eq!(a, b);
}

/// Mirostat 2 by hand: mu starts at 2 tau bits, so with tau 1 only tokens with surprise of at
/// most 2 bits (p >= 0.25) stay; after a draw mu moves by eta times the surprise error.
#[test]
fn mirostat_two_truncates_by_surprise_and_learns() {
    let logits = [0.4f32.ln(), 0.3f32.ln(), 0.2f32.ln(), 0.1f32.ln()];
    let params = SamplingParams {
        engine: Engine::LlamaCpp,
        mirostat: 2,
        mirostat_tau: 1.0,
        mirostat_eta: 1.0,
        ..Default::default()
    };
    let kept = distribution(&params, &logits, &[]);
    assert_eq!(kept.iter().map(|t| t.id).collect::<Vec<_>>(), [0, 1]);
    assert!((f64::from(kept[0].prob) - 4.0 / 7.0).abs() < 1e-6);
    // After drawing token 0 (surprise log2(7/4) = 0.81 bits), mu = 2 - (0.81 - 1) = 2.19: the
    // next step still keeps p >= 2^-2.19 = 0.22 only.
    let mut sampler = Sampler::new(&params).unwrap();
    let mut state = SampleState::new(1, 0, &[0], 4);
    let first = sampler.sample(&logits, &mut state).unwrap();
    assert!(first.id <= 1);
    let again = sampler.distribution(&logits, &state).unwrap();
    assert_eq!(again.len(), 2);
}

/// The per-stage trace ends where the sampler's distribution is, for every profile; for vLLM it
/// runs the generic chain, so this also holds the fast vLLM path equal to it.
fn trace_final(params: &SamplingParams, logits: &[f32], history: &[u32]) -> Vec<(u32, f64)> {
    let mut state = SampleState::new(7, 0, &history[..1.min(history.len())], logits.len());
    for &id in history.iter().skip(1) {
        state.accept(id);
    }
    let ids: Vec<u32> = (0..logits.len() as u32).collect();
    let trace = Sampler::new(params)
        .unwrap()
        .trace(logits, &state, &ids)
        .unwrap();
    let last = trace.last().unwrap();
    ids.iter()
        .zip(&last.tokens)
        .filter_map(|(&id, t)| t.map(|(_, p)| (id, f64::from(p))))
        .filter(|&(_, p)| p > 0.0)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn the_trace_ends_at_the_sampled_distribution(
        logits in logits_strategy(),
        engine in prop::sample::select(Engine::ALL.to_vec()),
        t in prop_oneof![Just(0.0f32), 0.2f32..2.0],
        k in prop_oneof![Just(-1), 1i32..20],
        top_p in 0.3f32..1.0,
        min_p in prop_oneof![Just(0.0f32), 0.01f32..0.3],
        rep in 0.9f32..1.6,
        presence in -0.5f32..0.5,
        reshaped in prop_oneof![Just(None), (0.0f32..=1.0).prop_map(Some)],
        history in prop::collection::vec(0u32..12, 1..16),
    ) {
        // transformers' top-h and llama.cpp's adaptive-p, under the engines that have them.
        let params = SamplingParams {
            engine,
            temperature: t,
            top_k: k,
            top_p,
            min_p,
            repetition_penalty: rep,
            presence_penalty: if engine == Engine::Transformers { 0.0 } else { presence },
            top_h: reshaped.filter(|&h| engine == Engine::Transformers && h > 0.0),
            adaptive_target: reshaped.filter(|_| engine == Engine::LlamaCpp).unwrap_or(-1.0),
            ..Default::default()
        };
        let got = distribution(&params, &logits, &history);
        let traced = trace_final(&params, &logits, &history);
        prop_assert!(tv(&got, &traced) < 1e-4, "{engine}: tv {} {got:?} {traced:?}", tv(&got, &traced));
    }
}

#[test]
fn the_trace_names_the_stage_that_removed_a_token() {
    // p = 0.5, 0.3, 0.15, 0.05
    let logits = [0.5f32.ln(), 0.3f32.ln(), 0.15f32.ln(), 0.05f32.ln()];
    let params = SamplingParams {
        top_p: 0.8,
        min_p: 0.2,
        ..Default::default()
    };
    let state = SampleState::new(1, 0, &[], 4);
    let trace = Sampler::new(&params)
        .unwrap()
        .trace(&logits, &state, &[0, 2, 3])
        .unwrap();
    let stages: Vec<&str> = trace.iter().map(|s| &*s.stage).collect();
    assert_eq!(
        stages,
        [
            "model",
            "allowed_ids",
            "bad_words",
            "min_tokens",
            "logit_bias",
            "penalties",
            "temperature",
            "min_p",
            "top_k",
            "top_p"
        ]
    );
    let removed_by = |token: usize| {
        trace
            .iter()
            .find(|s| s.tokens[token].is_none())
            .map(|s| &*s.stage)
    };
    assert_eq!(removed_by(0), None, "the top token survives");
    assert_eq!(
        removed_by(1),
        Some("top_p"),
        "0.15 passes min_p (0.1), not top_p 0.8"
    );
    assert_eq!(removed_by(2), Some("min_p"), "0.05 < 0.2 * 0.5");
    let model = &trace[0].tokens;
    assert!((model[0].unwrap().1 - 0.5).abs() < 1e-6);
    let last = trace.last().unwrap();
    assert!((last.tokens[0].unwrap().1 - 0.5 / 0.8).abs() < 1e-6);
}

/// `--set samplers=...` takes llama.cpp's own `--samplers` text, as samplab's llama.cpp export
/// writes it, and gives the same chain as the list.
#[test]
fn samplers_take_llama_cpps_own_text() {
    let mut text = SamplingParams::from_yaml("engine: llama.cpp").unwrap();
    text.set_assignment("samplers=penalties;temperature;min_p;top_k;top_p")
        .unwrap();
    let list = SamplingParams::from_yaml(
        "engine: llama.cpp\nsamplers: [penalties, temperature, min_p, top_k, top_p]",
    )
    .unwrap();
    assert_eq!(text, list);
    let err = text.set_assignment("samplers=top_k;nucleus").unwrap_err();
    assert!(err.to_string().contains("nucleus"), "{err}");
}
