//! When a sample ends and which of its text is final.
//!
//! Checked for each generated token, in order: EOS, a stop token id, a stop string, length
//! (the caller adds the context window's end), then [`StopMatcher::repeats`], last as in vLLM's
//! scheduler. Stop strings are matched on generated text across token boundaries. Text that could be the
//! start of a stop string is held back until it is known not to be one, so a stop string never
//! flashes on screen, and the emitted deltas always add up to the final text.

use crate::params::{RepetitionDetection, SamplingParams};
use crate::response::{StopMatched, StopReason};

/// How a sample ended: the reason, and for reason `stop` the stop string or token id (EOS or
/// listed in `stop`) behind it.
pub type Finish = (StopReason, Option<StopMatched>);

/// What one step adds to a sample.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepText {
    /// Text that is final: safe to show now, never taken back.
    pub emit: String,
    /// Set when the sample has ended.
    pub finished: Option<Finish>,
}

/// The stop conditions of one sample, with the text it holds back.
///
/// Per generated token: `let delta = detok.push(id); let step = matcher.step(id, &delta, n);`.
#[derive(Debug, Clone)]
pub struct StopMatcher {
    eos_ids: Vec<u32>,
    stop_ids: Vec<u32>,
    stop_strings: Vec<String>,
    /// Bytes in the longest stop string; held text is always shorter.
    longest: usize,
    include_stop_str: bool,
    max_tokens: Option<u32>,
    /// EOS does not end the sample (vLLM's and llama.cpp's `ignore_eos`).
    ignore_eos: bool,
    /// Stop strings are matched only after this many tokens, as vLLM does with `min_tokens`.
    min_tokens: u32,
    repetition: Option<RepetitionDetection>,
    /// Generated text not yet emitted: the longest suffix that begins some stop string. Every
    /// match still to come starts in it or later, so each step scans only it and the new text.
    held: String,
    finished: Option<Finish>,
}

impl StopMatcher {
    /// `eos_ids` are the model's end-of-sequence ids. Empty stop strings, which validation
    /// rejects, are ignored rather than stopping at once.
    pub fn new(params: &SamplingParams, eos_ids: &[u32]) -> Self {
        let stop = params.stop.as_ref();
        let stop_strings: Vec<String> = stop
            .into_iter()
            .flat_map(|s| s.strings())
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        Self {
            eos_ids: eos_ids.to_vec(),
            stop_ids: stop.into_iter().flat_map(|s| s.token_ids()).collect(),
            longest: stop_strings.iter().map(String::len).max().unwrap_or(0),
            stop_strings,
            include_stop_str: params.include_stop_str_in_output,
            max_tokens: params.max_tokens,
            ignore_eos: params.ignore_eos,
            min_tokens: params.min_tokens,
            repetition: params.repetition_detection,
            held: String::new(),
            finished: None,
        }
    }

    /// Takes the token `id`, the text `delta` it added, and `generated`, the number of tokens
    /// of this sample so far including `id`. After the sample has ended, emits nothing and
    /// repeats how it ended.
    pub fn step(&mut self, id: u32, delta: &str, generated: usize) -> StepText {
        if self.finished.is_some() {
            return StepText {
                emit: String::new(),
                finished: self.finished.clone(),
            };
        }
        if self.eos_ids.contains(&id) && !self.ignore_eos {
            let emit = std::mem::take(&mut self.held);
            return self.end(emit, StopReason::Stop, Some(StopMatched::Token(id)));
        }
        if self.stop_ids.contains(&id) {
            let mut emit = std::mem::take(&mut self.held);
            if self.include_stop_str {
                emit.push_str(delta);
            }
            return self.end(emit, StopReason::Stop, Some(StopMatched::Token(id)));
        }
        let mut text = std::mem::take(&mut self.held);
        text.push_str(delta);
        let matched = (generated as u64 > u64::from(self.min_tokens))
            .then(|| self.first_match(&text))
            .flatten();
        if let Some((start, stop)) = matched {
            let end = start + stop.len();
            text.truncate(if self.include_stop_str { end } else { start });
            let matched = Some(StopMatched::Text(stop.to_owned()));
            return self.end(text, StopReason::Stop, matched);
        }
        if self
            .max_tokens
            .is_some_and(|max| generated as u64 >= u64::from(max))
        {
            return self.end(text, StopReason::Length, None);
        }
        self.held = text.split_off(self.hold_start(&text));
        StepText {
            emit: text,
            finished: None,
        }
    }

    /// Whether the sample's generated `ids` now end in a repetition `repetition_detection`
    /// stops (reason `repetition_detected`). vLLM asks once every other stop has not ended the
    /// step, and not before `min_tokens` tokens.
    pub fn repeats(&self, ids: &[u32]) -> bool {
        ids.len() as u64 >= u64::from(self.min_tokens)
            && self.repetition.is_some_and(|r| r.detects(ids))
    }

    /// Takes the held text when the sample ends for a reason the matcher does not see (the
    /// context window is full, abort, error): it never became a stop string, so it is output.
    pub fn flush(&mut self) -> String {
        std::mem::take(&mut self.held)
    }

    fn end(&mut self, emit: String, reason: StopReason, matched: Option<StopMatched>) -> StepText {
        self.finished = Some((reason, matched));
        StepText {
            emit,
            finished: self.finished.clone(),
        }
    }

    /// The stop string to stop at and where it starts in `text`. Every match here completes
    /// with the newest token (an older one would have stopped the sample already); among
    /// those the earliest start wins, then the shortest.
    fn first_match(&self, text: &str) -> Option<(usize, &str)> {
        self.stop_strings
            .iter()
            .filter_map(|stop| text.find(stop.as_str()).map(|start| (start, stop.as_str())))
            .min_by_key(|&(start, stop)| (start, stop.len()))
    }

    /// Where the longest suffix of `text` that is a prefix of a stop string begins.
    fn hold_start(&self, text: &str) -> usize {
        let earliest = text.len().saturating_sub(self.longest.saturating_sub(1));
        (earliest..text.len())
            .filter(|&i| text.is_char_boundary(i))
            .find(|&i| {
                self.stop_strings
                    .iter()
                    .any(|stop| stop.starts_with(&text[i..]))
            })
            .unwrap_or(text.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// vLLM checks for repetition once `min_tokens` tokens are out, not before.
    #[test]
    fn repetition_is_looked_for_from_min_tokens_on() {
        let yaml = "repetition_detection: {max_pattern_size: 2, min_count: 2}\nmin_tokens: 5";
        let stops = StopMatcher::new(&SamplingParams::from_yaml(yaml).unwrap(), &[]);
        assert!(!stops.repeats(&[7, 7]), "2 tokens of 5");
        assert!(
            stops.repeats(&[1, 2, 3, 4, 4]),
            "the 5th token repeats the 4th"
        );
        assert!(!stops.repeats(&[1, 2, 3, 4, 5]));
        let off = StopMatcher::new(&SamplingParams::default(), &[]);
        assert!(!off.repeats(&[7, 7, 7, 7]));
    }
}
