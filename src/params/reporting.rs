//! The two vLLM settings that change what a run reports rather than what it samples:
//! `logprobs_mode` (which numbers the logprobs are) and `repetition_detection` (an n-gram loop
//! ends a sample as `repetition_detected`).

use serde::{Deserialize, Serialize};

/// Which numbers `logprobs` and `top_logprobs` report, as vLLM's engine argument
/// `logprobs_mode` names them: the model's own (raw) or the distribution the token was drawn
/// from (processed: after the logit processors, penalties, temperature and filters; a filtered
/// token has none). `prompt_logprobs` are raw under every mode, as in vLLM, whose prompt
/// tokens pass through no sampler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogprobsMode {
    #[default]
    RawLogprobs,
    ProcessedLogprobs,
    RawLogits,
    ProcessedLogits,
}

impl LogprobsMode {
    /// The names YAML takes, in vLLM's documented order, which the knob cycles through.
    pub const NAMES: &[&str] = &[
        "raw_logprobs",
        "processed_logprobs",
        "raw_logits",
        "processed_logits",
    ];

    /// The name YAML and vLLM take.
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// What each number is, as a page's hover names it.
    pub fn number_name(self) -> &'static str {
        match self {
            Self::RawLogprobs => "raw logprob",
            Self::ProcessedLogprobs => "processed logprob",
            Self::RawLogits => "raw logit",
            Self::ProcessedLogits => "processed logit",
        }
    }

    /// After the sampler's processing, not the model's own numbers.
    pub fn processed(self) -> bool {
        matches!(self, Self::ProcessedLogprobs | Self::ProcessedLogits)
    }

    /// Logits, which no softmax made logprobs.
    pub fn logits(self) -> bool {
        matches!(self, Self::RawLogits | Self::ProcessedLogits)
    }
}

/// vLLM's `RepetitionDetectionParams` (v0.17): a sample ends once its generated tokens end in
/// a pattern of `min_pattern_size..=max_pattern_size` tokens repeated `min_count` times in a
/// row. Each field defaults to 0 as in vLLM; `max_pattern_size` 0 turns detection off and
/// `min_pattern_size` 0 reads as 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepetitionDetection {
    #[serde(default)]
    pub max_pattern_size: u32,
    #[serde(default)]
    pub min_pattern_size: u32,
    #[serde(default)]
    pub min_count: u32,
}

impl RepetitionDetection {
    /// What is wrong with the settings, in vLLM's terms; `None` when vLLM takes them.
    pub fn refusal(&self) -> Option<&'static str> {
        if self.min_pattern_size > self.max_pattern_size {
            Some(
                "min_pattern_size must be <= max_pattern_size; set max_pattern_size to 0 (or \
                 the whole setting to null) to turn detection off",
            )
        } else if self.max_pattern_size > 0 && self.min_count < 2 {
            Some("min_count must be >= 2: a pattern seen once is no repetition")
        } else {
            None
        }
    }

    /// Whether it detects anything: vLLM skips the check when `max_pattern_size` is 0.
    pub fn is_on(&self) -> bool {
        self.max_pattern_size > 0
    }

    /// Whether `tokens` (a sample's generated ids, newest last) end in a pattern this detects:
    /// vLLM's `check_sequence_repetition`. Pattern lengths are tried from the shortest; one
    /// whose repeats would not fit in `tokens` ends the search, as longer ones fit less.
    pub fn detects(&self, tokens: &[u32]) -> bool {
        let shortest = self.min_pattern_size.max(1) as usize;
        let count = self.min_count as usize;
        if !self.is_on() || count < 2 {
            return false;
        }
        (shortest..=self.max_pattern_size as usize)
            .take_while(|&len| len * count <= tokens.len())
            .any(|len| {
                let tail = &tokens[tokens.len() - len * count..];
                let last = &tail[tail.len() - len..];
                tail.chunks_exact(len).all(|repeat| repeat == last)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(min_pattern_size: u32, max_pattern_size: u32, min_count: u32) -> RepetitionDetection {
        RepetitionDetection {
            max_pattern_size,
            min_pattern_size,
            min_count,
        }
    }

    /// The first prefix of `tokens` (its length: the step that stops) that `rule` detects.
    fn stop_step(rule: RepetitionDetection, tokens: &[u32]) -> Option<usize> {
        (1..=tokens.len()).find(|&n| rule.detects(&tokens[..n]))
    }

    /// Each expected step is worked out by hand from vLLM's rule: at step n the last L tokens
    /// must equal each of the `min_count - 1` blocks of L before them, for some L in range.
    #[test]
    fn detection_stops_where_vllms_rule_does() {
        let cases: &[(RepetitionDetection, &[u32], Option<usize>)] = &[
            // "ab" three times: complete at the 6th token, not before.
            (rule(1, 3, 3), &[1, 2, 1, 2, 1, 2, 9], Some(6)),
            // One token thrice: the 3rd "7" of a run, after a varied start.
            (rule(1, 4, 3), &[5, 6, 7, 7, 7, 7], Some(5)),
            // min_pattern_size 2 ignores the run of 7s; "56" twice ends at step 7.
            (rule(2, 4, 2), &[7, 7, 7, 5, 6, 5, 6], Some(7)),
            // min_pattern_size 0 reads as 1: "7 7" stops at step 2.
            (rule(0, 2, 2), &[7, 7, 8], Some(2)),
            // A pattern longer than max_pattern_size never counts: "1234" twice with max 3.
            (rule(1, 3, 2), &[1, 2, 3, 4, 1, 2, 3, 4], None),
            // ... but with max 4 it stops at step 8.
            (rule(1, 4, 2), &[1, 2, 3, 4, 1, 2, 3, 4], Some(8)),
            // Repeats must be in a row and of one length: "12 9 12 9 12" holds no pair or
            // single token twice in a row, and "129" twice at step 6 once length 3 counts.
            (rule(1, 2, 2), &[1, 2, 9, 1, 2, 9, 1, 2], None),
            (rule(3, 3, 2), &[1, 2, 9, 1, 2, 9, 1, 2], Some(6)),
            // Three repeats of three tokens after a mismatch: the rotation "312" completes at
            // step 14, one token before "123" would at step 15.
            (
                rule(3, 3, 3),
                &[1, 2, 3, 1, 0, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3],
                Some(14),
            ),
            // Off: max_pattern_size 0, whatever the count.
            (rule(0, 0, 2), &[4, 4, 4, 4], None),
        ];
        for &(rule, tokens, want) in cases {
            assert_eq!(stop_step(rule, tokens), want, "{rule:?} on {tokens:?}");
        }
    }

    #[test]
    fn vllms_own_examples_agree() {
        assert!(rule(2, 3, 3).detects(&[1, 2, 3, 1, 2, 3, 1, 2, 3]));
        assert!(!rule(2, 3, 3).detects(&[1, 2, 3, 1, 2, 3]));
        assert!(!rule(2, 3, 3).detects(&[1, 2, 3, 1, 2, 3, 1, 2, 4]));
        assert!(rule(2, 3, 3).detects(&[1, 2, 3, 4, 5, 6, 5, 6, 5, 6]));
        assert!(!rule(2, 5, 2).detects(&[1, 2, 3, 4, 5, 6, 7, 8, 9]));
        assert!(!rule(2, 3, 2).detects(&[]));
        assert!(!rule(3, 5, 3).detects(&[10, 20, 10, 20, 10, 20]));
        assert!(rule(2, 10, 3).detects(&[1, 2, 3, 4, 5, 6, 7, 8].repeat(5)));
    }

    #[test]
    fn settings_vllm_refuses_are_refused() {
        assert!(
            rule(3, 2, 2)
                .refusal()
                .unwrap()
                .contains("min_pattern_size")
        );
        assert!(rule(1, 0, 2).refusal().is_some(), "min above an off max");
        assert!(rule(1, 4, 1).refusal().unwrap().contains("min_count"));
        assert_eq!(rule(0, 0, 0).refusal(), None, "vLLM's defaults: off");
        assert_eq!(rule(0, 8, 2).refusal(), None);
    }

    #[test]
    fn modes_read_and_write_vllms_names() {
        for (i, &name) in LogprobsMode::NAMES.iter().enumerate() {
            let mode: LogprobsMode = serde_yaml_ng::from_str(name).unwrap();
            assert_eq!(serde_yaml_ng::to_string(&mode).unwrap().trim(), name);
            assert_eq!(mode.processed(), name.starts_with("processed"), "{i}");
            assert_eq!(mode.logits(), name.ends_with("logits"), "{i}");
        }
    }
}
