//! Stages that move the logits of a few tokens: logit bias, bans (bad words, min_tokens,
//! llama.cpp's ignore_eos), each engine's penalties, and DRY. They apply the same way to the whole
//! vocabulary and to a candidate list already cut by a filter (llama.cpp's `samplers` may put
//! them anywhere in the chain).

use super::constraint::Mask;
use super::history::SampleState;
use crate::params::{Engine, SamplingParams};
use std::collections::HashMap;

/// Logits a stage can move, addressed by token id.
pub(super) trait Logits {
    /// Replaces the logit of `id` by `f(logit)` when `id` is (still) a candidate.
    fn adjust(&mut self, id: u32, f: impl FnOnce(f32) -> f32);

    /// Removes every token not in `allowed`.
    fn keep_only(&mut self, allowed: &[u32]);

    /// Removes every token a constraint's mask refuses.
    fn keep_masked(&mut self, mask: &Mask);
}

impl Logits for [f32] {
    fn adjust(&mut self, id: u32, f: impl FnOnce(f32) -> f32) {
        if let Some(logit) = self.get_mut(id as usize) {
            *logit = f(*logit);
        }
    }

    fn keep_only(&mut self, allowed: &[u32]) {
        let mut keep = vec![false; self.len()];
        for &id in allowed {
            if let Some(k) = keep.get_mut(id as usize) {
                *k = true;
            }
        }
        for (logit, keep) in self.iter_mut().zip(keep) {
            if !keep {
                *logit = f32::NEG_INFINITY;
            }
        }
    }

    fn keep_masked(&mut self, mask: &Mask) {
        mask.apply(self);
    }
}

/// The repetition penalty of every engine: positive logits divided, the others multiplied.
fn repeat(logit: f32, penalty: f32) -> f32 {
    if logit <= 0.0 {
        logit * penalty
    } else {
        logit / penalty
    }
}

/// Adds each bias of `logit_bias`, clamped as the engines clamp it.
pub(super) fn logit_bias(logits: &mut (impl Logits + ?Sized), params: &SamplingParams) {
    for (id, bias) in params.logit_bias.iter().flat_map(|b| b.applied()) {
        logits.adjust(id, |l| l + bias);
    }
}

/// Sets every id in `ids` to -inf.
pub(super) fn ban(logits: &mut (impl Logits + ?Sized), ids: impl IntoIterator<Item = u32>) {
    for id in ids {
        logits.adjust(id, |_| f32::NEG_INFINITY);
    }
}

/// vLLM's and transformers' bad words: a word's last token is banned where the tokens before
/// it end the text so far (a one-token word is always banned).
pub(super) fn bad_words(
    logits: &mut (impl Logits + ?Sized),
    words: &[Vec<u32>],
    state: &SampleState,
) {
    let output = state.output();
    for word in words {
        if let Some((&last, prefix)) = word.split_last()
            && output.ends_with(prefix)
        {
            logits.adjust(last, |_| f32::NEG_INFINITY);
        }
    }
}

/// (id, count) of each distinct token of `tokens`, in `scratch`.
fn counts<'s>(tokens: &[u32], scratch: &'s mut Vec<(u32, u32)>) -> &'s [(u32, u32)] {
    let mut sorted = tokens.to_vec();
    sorted.sort_unstable();
    scratch.clear();
    for id in sorted {
        match scratch.last_mut() {
            Some((last, n)) if *last == id => *n += 1,
            _ => scratch.push((id, 1)),
        }
    }
    scratch
}

/// Each engine's repetition, frequency and presence penalties.
///
/// vLLM: repetition over the set of prompt and output tokens, then frequency and presence over
/// the output's counts. transformers: repetition over prompt and output. llama.cpp: all three
/// over the last `repeat_last_n` tokens, prompt included, for each token counted there.
pub(super) fn penalties(
    logits: &mut (impl Logits + ?Sized),
    params: &SamplingParams,
    state: &SampleState,
    scratch: &mut Vec<(u32, u32)>,
) {
    let (rep, freq, pres) = (
        params.repetition_penalty,
        params.frequency_penalty,
        params.presence_penalty,
    );
    match params.engine {
        Engine::Vllm | Engine::Transformers => {
            if rep != 1.0 {
                for &id in state.seen.ids() {
                    logits.adjust(id, |l| repeat(l, rep));
                }
            }
            if freq != 0.0 || pres != 0.0 {
                for &(id, n) in counts(state.output(), scratch) {
                    logits.adjust(id, |l| l - freq * n as f32 - pres);
                }
            }
        }
        Engine::LlamaCpp => {
            let window = params.repeat_last_n;
            if window == 0 || (rep == 1.0 && freq == 0.0 && pres == 0.0) {
                return;
            }
            let last = state.last(usize::try_from(window).ok());
            for &(id, n) in counts(last, scratch) {
                logits.adjust(id, |l| repeat(l, rep) - (n as f32 * freq + pres));
            }
        }
    }
}

/// llama.cpp's DRY ("don't repeat yourself"): a token that would extend a sequence already seen
/// earlier in the window, longer than `dry_allowed_length`, loses
/// `multiplier * base^(length - allowed_length)`. Sequences do not run across a breaker token
/// (a token whose text contains a breaker string), and breakers themselves are never penalised.
pub(super) fn dry(
    logits: &mut (impl Logits + ?Sized),
    params: &SamplingParams,
    state: &SampleState,
    breakers: &[u32],
) {
    let allowed = params.dry_allowed_length as usize;
    if params.dry_multiplier == 0.0 || params.dry_base < 1.0 || params.dry_penalty_last_n == 0 {
        return;
    }
    let window = state.last(usize::try_from(params.dry_penalty_last_n).ok());
    let n = window.len();
    if n <= allowed {
        return;
    }
    let is_breaker = |id: &u32| breakers.binary_search(id).is_ok();
    // Matches may not reach back past the nearest breaker: `limit` tokens end the window after it.
    let limit = window.iter().rev().position(is_breaker).unwrap_or(n);
    if limit < allowed {
        return;
    }
    // z[k]: how many tokens before the one k from the end match the window's own end.
    let reversed: Vec<u32> = window.iter().rev().copied().collect();
    let z = z_function(&reversed);
    let mut longest: HashMap<u32, usize> = HashMap::new();
    for (k, &matched) in z.iter().enumerate().skip(1) {
        let length = matched.min(limit);
        if length >= allowed {
            // The token after that earlier occurrence would extend the repeat.
            let next = reversed[k - 1];
            let entry = longest.entry(next).or_default();
            *entry = (*entry).max(length);
        }
    }
    let max_exponent = if params.dry_base > 1.000_001 {
        (88.722_84_f32 / params.dry_base.ln()) as usize
    } else {
        usize::MAX
    };
    for (id, length) in longest {
        if is_breaker(&id) {
            continue;
        }
        let exponent = (length - allowed).min(max_exponent) as i32;
        let penalty = params.dry_multiplier * params.dry_base.powi(exponent);
        logits.adjust(id, |l| l - penalty);
    }
}

/// The Z-function: `z[k]` is the length of the longest common prefix of `s` and `s[k..]`.
fn z_function(s: &[u32]) -> Vec<usize> {
    let n = s.len();
    let mut z = vec![0; n];
    let (mut left, mut right) = (0, 0);
    for k in 1..n {
        if k < right {
            z[k] = (right - k).min(z[k - left]);
        }
        while k + z[k] < n && s[z[k]] == s[k + z[k]] {
            z[k] += 1;
        }
        if k + z[k] > right {
            left = k;
            right = k + z[k];
        }
    }
    z
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(tokens: &[u32], prompt: usize) -> SampleState {
        let mut s = SampleState::new(1, 0, &tokens[..prompt], 16);
        for &t in &tokens[prompt..] {
            s.accept(t);
        }
        s
    }

    #[test]
    fn z_function_matches_the_naive_definition() {
        let s = [1, 2, 1, 2, 1, 3, 1, 2];
        let z = z_function(&s);
        for k in 1..s.len() {
            let naive = (0..s.len() - k).take_while(|&i| s[i] == s[k + i]).count();
            assert_eq!(z[k], naive, "k = {k}");
        }
    }

    /// llama.cpp's own example: after `a b c c b c y a b c`, `c` would make `a b c c` (a repeat
    /// of 3), `y` `b c y` (2); with allowed_length 2 `c` loses multiplier * base^1, `y` multiplier.
    #[test]
    fn dry_penalises_the_tokens_that_extend_a_repeat() {
        let (a, b, c, y) = (1, 2, 3, 4);
        let s = state(&[a, b, c, c, b, c, y, a, b, c], 0);
        let params = SamplingParams {
            engine: Engine::LlamaCpp,
            dry_multiplier: 0.5,
            dry_base: 2.0,
            dry_allowed_length: 2,
            ..Default::default()
        };
        let mut logits = [0.0f32; 8];
        dry(logits.as_mut_slice(), &params, &s, &[]);
        assert_eq!(logits[c as usize], -1.0);
        assert_eq!(logits[y as usize], -0.5);
        assert_eq!(logits[b as usize], 0.0, "a repeat of 1 is allowed");
        let mut logits = [0.0f32; 8];
        dry(logits.as_mut_slice(), &params, &s, &[a]);
        assert_eq!(
            logits[c as usize],
            -0.5 * 2f32.powi(0),
            "the breaker `a` caps the match at 2"
        );
    }

    #[test]
    fn each_engine_counts_its_own_penalty_window() {
        // prompt [5, 6], output [6, 6, 7]
        let s = state(&[5, 6, 6, 6, 7], 2);
        let mut scratch = Vec::new();
        let mut vllm = [1.0f32; 8];
        let params = SamplingParams {
            frequency_penalty: 0.5,
            presence_penalty: 0.25,
            repetition_penalty: 2.0,
            ..Default::default()
        };
        penalties(vllm.as_mut_slice(), &params, &s, &mut scratch);
        assert_eq!(
            vllm[5], 0.5,
            "prompt tokens get only the repetition penalty"
        );
        assert_eq!(vllm[6], 0.5 - 2.0 * 0.5 - 0.25);
        assert_eq!(vllm[7], 0.5 - 0.5 - 0.25);
        let llama = SamplingParams {
            engine: Engine::LlamaCpp,
            repeat_last_n: 3,
            ..params
        };
        let mut logits = [1.0f32; 8];
        penalties(logits.as_mut_slice(), &llama, &s, &mut scratch);
        assert_eq!(logits[5], 1.0, "outside the window of 3");
        assert_eq!(logits[6], 0.5 - 2.0 * 0.5 - 0.25);
        assert_eq!(logits[7], 0.5 - 0.5 - 0.25);
    }

    #[test]
    fn repetition_divides_positive_logits_and_multiplies_the_others() {
        let s = state(&[0, 1], 2);
        let mut logits = [2.0, -1.0, 3.0, -4.0];
        let params = SamplingParams {
            repetition_penalty: 2.0,
            ..Default::default()
        };
        penalties(logits.as_mut_slice(), &params, &s, &mut Vec::new());
        assert_eq!(logits, [1.0, -2.0, 3.0, -4.0]);
    }

    #[test]
    fn bad_words_ban_the_last_token_after_their_prefix() {
        let s = state(&[1, 2, 3], 1);
        let mut logits = [0.0f32; 8];
        bad_words(
            logits.as_mut_slice(),
            &[vec![3, 4], vec![2, 5], vec![6]],
            &s,
        );
        assert_eq!(logits[4], f32::NEG_INFINITY);
        assert_eq!(logits[5], 0.0, "2 does not end the output");
        assert_eq!(logits[6], f32::NEG_INFINITY);
    }
}
