//! A sample's tokens scored by a model with another vocabulary, exactly: the two tokenizations
//! of the sample's text are lined up by bytes, and wherever both put a token boundary (an
//! aligned boundary) the scoring model's probability of the bytes since the previous one is the
//! product of its own tokens' probabilities in between (the chain rule over its tokenization).
//!
//! So a sample token whose end is aligned carries the scoring model's logprob of the bytes from
//! the previous aligned boundary to its end: its own probability when its start is aligned too,
//! else the probability of the group of sample tokens that ends with it (`covers` says how many).
//! A token inside a group, one that spells no bytes (a special token), and one reaching past the
//! text both tokenizations spell have none. A rank is had only where the token is exactly one
//! of the scoring model's tokens.

/// Per sample token: the scoring model's logprob, rank and how many sample tokens it covers
/// (0 where there is no logprob).
#[derive(Debug, Clone, PartialEq)]
pub struct Aligned {
    pub logprobs: Vec<Option<f32>>,
    pub ranks: Vec<Option<u32>>,
    pub covers: Vec<u32>,
}

/// One scoring-model token: where it ends in the text's bytes, and its logprob and rank.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    pub end: usize,
    pub logprob: f32,
    pub rank: u32,
}

/// Lines up the sample's tokens, `lengths[i]` bytes each in order from byte 0, with the scoring
/// model's tokens over the same text, in order from byte 0 (a token of no bytes ends where the
/// one before it does). Only the first `spelled` bytes are the sample tokens' own (a stop
/// string may cut the text inside a token): a token ending past them has no figures.
///
/// Each scoring token belongs to the group that ends at or after its end, so one of no bytes
/// at a boundary counts in the group before it, and one at byte 0 in the first.
pub fn align(lengths: &[usize], spelled: usize, scorer: &[Scored]) -> Aligned {
    let aligned = |at: usize| at <= spelled && scorer.binary_search_by(|s| s.end.cmp(&at)).is_ok();
    let mut out = Aligned {
        logprobs: vec![None; lengths.len()],
        ranks: vec![None; lengths.len()],
        covers: vec![0; lengths.len()],
    };
    // The next scoring token to take, the last aligned boundary and its first sample token.
    let (mut next, mut boundary, mut first) = (0, 0, 0);
    let mut start = 0;
    for (i, &length) in lengths.iter().enumerate() {
        let end = start + length;
        if length == 0 && start == boundary {
            // Nothing between it and the boundary: it opens no group.
            first = i + 1;
        } else if length > 0 && aligned(end) {
            let taken = scorer[next..].iter().take_while(|s| s.end <= end).count();
            let group = &scorer[next..next + taken];
            next += taken;
            let sum: f64 = group.iter().map(|s| f64::from(s.logprob)).sum();
            out.logprobs[i] = Some(sum as f32);
            out.covers[i] = (i + 1 - first) as u32;
            if let ([one], 1) = (group, out.covers[i]) {
                out.ranks[i] = Some(one.rank);
            }
            boundary = end;
            first = i + 1;
        }
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scoring tokens ending at `ends`, token j with logprob −(j+1) and rank j+10.
    fn scorer(ends: &[usize]) -> Vec<Scored> {
        ends.iter()
            .enumerate()
            .map(|(j, &end)| Scored {
                end,
                logprob: -(j as f32 + 1.0),
                rank: j as u32 + 10,
            })
            .collect()
    }

    #[test]
    fn matching_tokens_carry_their_own_logprob_and_rank() {
        // "ab|c|de" both ways.
        let out = align(&[2, 1, 2], 5, &scorer(&[2, 3, 5]));
        assert_eq!(out.logprobs, [Some(-1.0), Some(-2.0), Some(-3.0)]);
        assert_eq!(out.ranks, [Some(10), Some(11), Some(12)]);
        assert_eq!(out.covers, [1, 1, 1]);
    }

    #[test]
    fn a_group_ends_at_the_next_shared_boundary_and_sums_the_scorer_tokens_in_it() {
        // Sample "ab|cd|e|f", scorer "a|bc|def": the only shared boundaries are 0 and 6.
        let out = align(&[2, 2, 1, 1], 6, &scorer(&[1, 3, 6]));
        assert_eq!(out.logprobs, [None, None, None, Some(-6.0)]);
        assert_eq!(out.covers, [0, 0, 0, 4]);
        assert_eq!(out.ranks, [None; 4]);
        // One sample token split by the scorer in two: a logprob, but no rank.
        let out = align(&[3], 3, &scorer(&[1, 3]));
        assert_eq!(
            (out.logprobs, out.ranks, out.covers),
            (vec![Some(-3.0)], vec![None], vec![1])
        );
        // Two sample tokens that are one scorer token: the second carries it for both.
        let out = align(&[1, 2, 1], 4, &scorer(&[3, 4]));
        assert_eq!(out.logprobs, [None, Some(-1.0), Some(-2.0)]);
        assert_eq!(out.covers, [0, 2, 1]);
        assert_eq!(out.ranks, [None, None, Some(11)]);
    }

    #[test]
    fn groups_partition_the_text_and_sum_to_the_scorer_total() {
        let lengths = [3, 1, 4, 1, 5, 9, 2, 6];
        let total: usize = lengths.iter().sum();
        let ends = [2, 4, 5, 9, 10, 14, 20, 23, 29, 31];
        assert_eq!(*ends.last().unwrap(), total);
        let out = align(&lengths, total, &scorer(&ends));
        let sum: f32 = out.logprobs.iter().flatten().sum();
        let expected: f32 = scorer(&ends).iter().map(|s| s.logprob).sum();
        assert_eq!(sum, expected);
        // The covered tokens, group by group, are every token once.
        let covered: u32 = out.covers.iter().sum();
        assert_eq!(covered as usize, lengths.len());
        for (i, &n) in out.covers.iter().enumerate() {
            assert_eq!(n > 0, out.logprobs[i].is_some());
        }
    }

    #[test]
    fn tokens_of_no_bytes_have_no_figures_and_open_no_group() {
        // A special token first, one inside a group, one at the end (EOS).
        let out = align(&[0, 2, 0, 1, 0], 3, &scorer(&[1, 3]));
        assert_eq!(out.logprobs, [None, None, None, Some(-3.0), None]);
        assert_eq!(out.covers, [0, 0, 0, 3, 0]);
        // Scoring tokens of no bytes: at byte 0 they count in the first group, at a boundary
        // in the group before it; a rank needs the one token alone.
        let out = align(&[1, 1], 2, &scorer(&[0, 1, 1, 2]));
        assert_eq!(out.logprobs, [Some(-6.0), Some(-4.0)]);
        assert_eq!(out.ranks, [None, Some(13)]);
    }

    #[test]
    fn tokens_past_the_spelled_text_have_no_figures() {
        // A stop string cut the text at byte 3, inside the second token "cde".
        let out = align(&[2, 3, 1], 3, &scorer(&[2, 3]));
        assert_eq!(out.logprobs, [Some(-1.0), None, None]);
        assert_eq!(out.covers, [1, 0, 0]);
        // Nothing spelled at all, and no tokens.
        assert_eq!(align(&[2], 0, &scorer(&[])).logprobs, [None]);
        assert!(align(&[], 0, &scorer(&[])).logprobs.is_empty());
    }
}
