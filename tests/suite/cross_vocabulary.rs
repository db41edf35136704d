//! Model disagreement per token across vocabularies (stories260K's SentencePiece against
//! SmolLM2's byte-level BPE): every figure of a sample's tokens against the scoring model's
//! teacher-forced logits over its own tokenization of the text, lined up by bytes here.

use crate::common;

use samplab::engine::disagreement::{Wanted, row_channel};
use samplab::engine::score::ScoreSample;
use samplab::engine::{LoadedModel, Prompt, Runner, ScoreRequest};
use samplab::model::text::{Specials, text_bytes};
use samplab::response::CrossScore;
use std::collections::BTreeSet;

const PROMPT: &str = "Once upon a time";

/// How far a logprob computed here may be from the engine's: SmolLM2's quantized products
/// round activations, so a forward pass split otherwise (the prompt cached or not) differs in
/// the third decimal; a wrong token or span is off by far more.
const TOLERANCE: f64 = 5e-3;

/// log_softmax in f64.
fn log_probs(logits: &[f32]) -> Vec<f64> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = logits.iter().map(|&l| (l as f64 - max).exp()).sum();
    logits.iter().map(|&l| l as f64 - max - sum.ln()).collect()
}

/// Where each of `lengths` ends, from 0.
fn ends(lengths: impl IntoIterator<Item = usize>) -> Vec<usize> {
    lengths
        .into_iter()
        .scan(0, |end, length| {
            *end += length;
            Some(*end)
        })
        .collect()
}

/// Checks `score`, `scorer`'s figures of a sample of `sampler` whose tokens are `token_ids`
/// and text `text`, after the raw prompt [`PROMPT`]: each token's logprob is the scorer's over
/// the bytes since the last boundary both tokenizations share, computed here from a fresh
/// forward pass over the scorer's own tokenization. Returns how many bytes the tokens spell.
fn check(
    score: &CrossScore,
    sampler: &LoadedModel,
    scorer: &mut LoadedModel,
    token_ids: &[u32],
    text: &str,
) -> usize {
    let per_token = score.per_token.as_ref().expect("per-token figures");
    let reason = per_token.null_reason.as_deref().unwrap_or_default();
    let (Some(logprobs), Some(ranks), Some(covers)) =
        (&per_token.logprobs, &per_token.ranks, &per_token.covers)
    else {
        panic!("figures for another vocabulary: {per_token:?}")
    };
    assert!(score.retokenized && per_token.kl.is_none());
    assert!(reason.contains("vocabularies differ"), "{reason}");
    let n = token_ids.len();
    assert_eq!((logprobs.len(), ranks.len(), covers.len()), (n, n, n));

    // The sample's tokens by bytes, as far as they spell its text.
    let own: Vec<Vec<u8>> = text_bytes(&sampler.tokenizer, token_ids, Specials::Skipped);
    let spelled = own
        .concat()
        .iter()
        .zip(text.as_bytes())
        .take_while(|(a, b)| a == b)
        .count();
    let own_ends = ends(own.iter().map(Vec::len));

    // The scorer's tokens over the prompt and the text, teacher-forced from scratch.
    let prefix = scorer.encode(PROMPT).unwrap();
    let full = scorer.encode(&format!("{PROMPT}{text}")).unwrap();
    let start = prefix
        .iter()
        .zip(&full)
        .take_while(|(a, b)| a == b)
        .count()
        .max(1);
    assert_eq!(score.tokens, full.len() - start);
    scorer.backend.reset();
    let rows = scorer.backend.prefill(&full, start - 1).unwrap().logits;
    let theirs = text_bytes(&scorer.tokenizer, &full[start..], Specials::Spelled);
    let spelled_by_scorer = theirs.concat();
    assert!(spelled_by_scorer.ends_with(text.as_bytes()));
    let offset = spelled_by_scorer.len() - text.len();
    let their_ends: Vec<usize> = ends(theirs.iter().map(Vec::len))
        .into_iter()
        .map(|end| end.saturating_sub(offset))
        .collect();
    let their_starts: Vec<usize> = std::iter::once(0)
        .chain(their_ends.iter().copied())
        .collect();
    let figures: Vec<(f64, u32)> = full[start..]
        .iter()
        .zip(&rows)
        .map(|(&id, logits)| {
            let id = id as usize;
            let above = (0..logits.len())
                .filter(|&v| logits[v] > logits[id] || (logits[v] == logits[id] && v < id))
                .count();
            (log_probs(logits)[id], above as u32 + 1)
        })
        .collect();
    let total: f64 = figures.iter().map(|f| f.0).sum();
    assert!(
        (total / score.tokens as f64 - score.mean_logprob).abs() < TOLERANCE,
        "{total} over {} tokens vs mean {}",
        score.tokens,
        score.mean_logprob
    );

    // Boundaries both put a token edge on, within the spelled text.
    let shared: BTreeSet<usize> = own_ends
        .iter()
        .copied()
        .filter(|&end| end <= spelled && their_ends.contains(&end))
        .chain([0])
        .collect();
    let mut last_figure = None;
    for i in 0..n {
        let (start_i, end_i) = (own_ends[i] - own[i].len(), own_ends[i]);
        if own[i].is_empty() || !shared.contains(&end_i) {
            assert_eq!((logprobs[i], ranks[i], covers[i]), (None, None, 0), "{i}");
            continue;
        }
        let from = *shared.range(..end_i).next_back().unwrap();
        let group: Vec<usize> = (0..their_ends.len())
            .filter(|&j| their_ends[j] <= end_i && (their_ends[j] > from || from == 0))
            .collect();
        let expected: f64 = group.iter().map(|&j| figures[j].0).sum();
        let got = logprobs[i].unwrap_or_else(|| panic!("a figure at {i}: {per_token:?}"));
        assert!(
            (f64::from(got) - expected).abs() < TOLERANCE,
            "{i}: {got} vs {expected}"
        );
        // The group is every token since the last one with a figure.
        let first = last_figure.map_or(0, |l: usize| l + 1);
        let first = (first..=i)
            .find(|&k| !own[k].is_empty() || own_ends[k] > from)
            .unwrap();
        assert_eq!(covers[i] as usize, i + 1 - first, "covers at {i}");
        assert_eq!(own_ends[first] - own[first].len(), from);
        let one = match &group[..] {
            [j] if covers[i] == 1 && their_starts[*j] == start_i => Some(figures[*j].1),
            _ => None,
        };
        assert_eq!(ranks[i], one, "rank at {i}");
        last_figure = Some(i);
    }
    // Whole texts: the figures add up to the scorer's total logprob of the sample.
    if spelled == text.len() && own_ends.last().is_none_or(|&e| e == spelled) {
        let sum: f64 = logprobs.iter().flatten().map(|&l| f64::from(l)).sum();
        let tolerance = TOLERANCE * score.tokens as f64;
        assert!((sum - total).abs() < tolerance, "{sum} vs {total}");
    }
    spelled
}

#[test]
fn sample_json_gives_each_token_the_other_vocabularys_logprob_of_its_byte_span() {
    let (Some(stories), Some(smol)) = (common::test_model(), common::real_model()) else {
        return;
    };
    let both = common::compare(
        PROMPT,
        &[&stories, &smol],
        &["num_samples=2", "max_tokens=12", "seed=5"],
    );
    let mut models =
        [&stories, &smol].map(|p| common::load_at(p, samplab::model::device::DeviceChoice::Cpu));
    let (mut grouped, mut ranked) = (0, 0);
    for (i, response) in both.iter().enumerate() {
        let [a, b] = &mut models;
        let (sampler, scorer) = if i == 0 { (a, b) } else { (b, a) };
        for trajectory in &response.trajectories {
            let [score] = &trajectory.cross_scores.as_ref().expect("scored")[..] else {
                panic!("one other model")
            };
            let spelled = check(
                score,
                sampler,
                scorer,
                &trajectory.token_ids,
                &trajectory.text,
            );
            assert_eq!(spelled, trajectory.text.len());
            let per_token = score.per_token.as_ref().unwrap();
            grouped += per_token
                .covers
                .iter()
                .flatten()
                .filter(|&&c| c > 1)
                .count();
            ranked += per_token.ranks.iter().flatten().flatten().count();
        }
        assert_eq!(response.stats.as_ref().unwrap().mean_kl, None);
    }
    assert!(ranked > 0, "tokens both vocabularies share get ranks");
    assert!(grouped > 0, "the two tokenizations part somewhere");
}

/// `sampler`'s tokens for `text` (which follows [`PROMPT`]) scored by `scorer` at the engine,
/// the sampler's worker sending their bytes.
fn score_across(
    sampler: &mut LoadedModel,
    scorer: &mut LoadedModel,
    token_ids: Vec<u32>,
    text: &str,
) -> CrossScore {
    let prompt = Prompt::raw(PROMPT);
    let vocab = sampler.vocab_fingerprint();
    let request = ScoreRequest {
        run_id: 1,
        vocab,
        prompt,
        rendered: None,
        prompt_token_ids: sampler.encode(PROMPT).unwrap(),
        samples: vec![ScoreSample {
            index: 0,
            text: text.to_owned(),
            token_ids,
        }],
        feed: None,
    };
    let (to, feed) = row_channel();
    let bytes = request.rows_request(Wanted::Bytes, to);
    let own_vocab = scorer.vocab_fingerprint();
    let mut scores = std::thread::scope(|scope| {
        scope.spawn(|| sampler.rows(&bytes, &mut || false).unwrap());
        scorer
            .score(&request.with_feed(feed), own_vocab, &mut || false)
            .unwrap()
    });
    scores.pop().expect("one score")
}

/// A sampler's ids for `text`: SentencePiece adds the leading space itself.
fn ids_for(model: &LoadedModel, text: &str) -> Vec<u32> {
    let ids = model
        .tokenizer
        .encode(text, false)
        .unwrap()
        .get_ids()
        .to_vec();
    let spelled = text_bytes(&model.tokenizer, &ids, Specials::Skipped).concat();
    if spelled == text.as_bytes() {
        return ids;
    }
    let ids = model
        .tokenizer
        .encode(text.trim_start(), false)
        .unwrap()
        .get_ids()
        .to_vec();
    assert_eq!(
        text_bytes(&model.tokenizer, &ids, Specials::Skipped).concat(),
        text.as_bytes()
    );
    ids
}

#[test]
fn byte_fallback_tokens_are_lined_up_byte_by_byte_both_ways() {
    let (Some(mut stories), Some(mut smol)) =
        (common::loaded_test_model(), common::loaded_real_model())
    else {
        return;
    };
    let text = " Café ☕ au lait";
    for reverse in [false, true] {
        let (sampler, scorer) = if reverse {
            (&mut smol, &mut stories)
        } else {
            (&mut stories, &mut smol)
        };
        let ids = ids_for(sampler, text);
        if !reverse {
            // stories260K's 512 pieces lack the cup: byte-fallback tokens, a byte each.
            let bytes = text_bytes(&sampler.tokenizer, &ids, Specials::Skipped);
            let fallback = |b: &&Vec<u8>| b.len() == 1 && b[0] >= 0x80;
            assert!(bytes.iter().any(|b| fallback(&b)), "{bytes:?}");
        }
        let score = score_across(sampler, scorer, ids.clone(), text);
        assert_eq!(check(&score, sampler, scorer, &ids, text), text.len());
    }
}

#[test]
fn tokens_past_a_stop_strings_cut_have_no_figures_and_say_why() {
    let (Some(mut stories), Some(mut smol)) =
        (common::loaded_test_model(), common::loaded_real_model())
    else {
        return;
    };
    let whole = " there was a little girl named Lily";
    let ids = ids_for(&stories, whole);
    let bytes = text_bytes(&stories.tokenizer, &ids, Specials::Skipped);
    // Cut one byte into the first token longer than a byte past the second.
    let long = (2..ids.len()).find(|&i| bytes[i].len() > 1).unwrap();
    let cut = bytes[..long].concat().len() + 1;
    let text = &whole[..cut];
    let score = score_across(&mut stories, &mut smol, ids.clone(), text);
    assert_eq!(check(&score, &stories, &mut smol, &ids, text), cut);
    let per_token = score.per_token.unwrap();
    let logprobs = per_token.logprobs.unwrap();
    assert!(logprobs[long..].iter().all(Option::is_none), "{logprobs:?}");
    assert!(logprobs[..long].iter().any(Option::is_some), "{logprobs:?}");
    let reason = per_token.null_reason.unwrap();
    assert!(reason.contains(&format!("past byte {cut}")), "{reason}");
}
