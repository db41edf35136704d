//! Stop conditions on hand-made token streams: each token is an id and the text it decoded to.

use proptest::prelude::*;
use samplab::params::{SamplingParams, TokenText, TokenTexts};
use samplab::response::{StopMatched, StopReason};
use samplab::sampling::stop::{Finish, StopMatcher};

const EOS: u32 = 2;

fn params(stop: &[TokenText], include: bool, max_tokens: Option<u32>) -> SamplingParams {
    SamplingParams {
        stop: Some(TokenTexts(stop.to_vec())),
        include_stop_str_in_output: include,
        max_tokens,
        ..Default::default()
    }
}

fn text(s: &str) -> TokenText {
    TokenText::Text(s.to_owned())
}

/// What a run shows: every delta in order, and how it ended (if it did).
struct Run {
    deltas: Vec<String>,
    finish: Option<Finish>,
}

impl Run {
    fn text(&self) -> String {
        self.deltas.concat()
    }
}

/// Feeds `(id, text)` tokens as the engine would, stopping at the first finish.
fn run(params: &SamplingParams, tokens: &[(u32, &str)]) -> Run {
    let mut matcher = StopMatcher::new(params, &[EOS]);
    let mut deltas = Vec::new();
    for (n, &(id, delta)) in tokens.iter().enumerate() {
        let step = matcher.step(id, delta, n + 1);
        deltas.push(step.emit);
        if step.finished.is_some() {
            return Run {
                deltas,
                finish: step.finished,
            };
        }
    }
    Run {
        deltas,
        finish: None,
    }
}

/// Text tokens get ids from 100 up, clear of EOS and the stop ids used here.
fn words<'a>(texts: &[&'a str]) -> Vec<(u32, &'a str)> {
    (100..).zip(texts.iter().copied()).collect()
}

fn stopped_by_text(s: &str) -> Option<Finish> {
    Some((StopReason::Stop, Some(StopMatched::Text(s.to_owned()))))
}

fn stopped_by_token(id: u32) -> Option<Finish> {
    Some((StopReason::Stop, Some(StopMatched::Token(id))))
}

fn length() -> Option<Finish> {
    Some((StopReason::Length, None))
}

/// Asserts that what was on screen after every step was a prefix of `expected`.
fn assert_never_shown_beyond(run: &Run, expected: &str) {
    let mut shown = String::new();
    for delta in &run.deltas {
        shown.push_str(delta);
        assert!(
            expected.starts_with(&shown),
            "showed {shown:?}, final text is {expected:?}"
        );
    }
}

#[test]
fn stop_string_split_across_three_tokens() {
    let p = params(&[text("STOP")], false, None);
    let run = run(&p, &words(&["ab S", "TO", "P cd"]));
    assert_eq!(run.text(), "ab ");
    assert_eq!(run.deltas, ["ab ", "", ""]);
    assert_eq!(run.finish, stopped_by_text("STOP"));
}

#[test]
fn stop_string_starting_inside_a_token() {
    let p = params(&[text("\n\n")], false, None);
    let run = run(&p, &words(&["ab\n", "\nc"]));
    assert_eq!(run.text(), "ab");
    assert_eq!(run.finish, stopped_by_text("\n\n"));
}

#[test]
fn the_stop_string_that_completes_first_wins() {
    let p = params(&[text("abcd"), text("bc")], false, None);
    let run = run(&p, &words(&["a", "b", "c", "d"]));
    assert_eq!(run.text(), "a");
    assert_eq!(run.finish, stopped_by_text("bc"));
}

#[test]
fn in_the_same_token_the_earliest_starting_stop_string_wins() {
    let p = params(&[text("bc"), text("abcd")], false, None);
    let run = run(&p, &words(&["xabcd"]));
    assert_eq!(run.text(), "x");
    assert_eq!(run.finish, stopped_by_text("abcd"));

    let p = params(&[text("abc"), text("ab")], true, None);
    let run = self::run(&p, &words(&["xabcd"]));
    assert_eq!(run.text(), "xab", "same start: the shorter completes first");
    assert_eq!(run.finish, stopped_by_text("ab"));
}

#[test]
fn include_stop_str_in_output_keeps_the_match_and_cuts_after_it() {
    let tokens = words(&["ab\n", "\nc"]);
    let with = run(&params(&[text("\n\n")], true, None), &tokens);
    assert_eq!(with.text(), "ab\n\n");
    assert_eq!(with.finish, stopped_by_text("\n\n"));
    let without = run(&params(&[text("\n\n")], false, None), &tokens);
    assert_eq!(without.text(), "ab");
}

#[test]
fn a_prefix_of_a_stop_string_is_never_shown_before_it_matches() {
    let p = params(&[text("</answer>")], false, None);
    let run = run(
        &p,
        &words(&["The", " end", "<", "/", "ans", "wer", ">", " more"]),
    );
    assert_eq!(run.text(), "The end");
    assert_never_shown_beyond(&run, "The end");
    assert!(
        run.deltas.iter().all(|d| !d.contains('<')),
        "{:?}",
        run.deltas
    );
}

#[test]
fn a_held_prefix_that_is_not_a_stop_is_emitted_in_full_later() {
    let p = params(&[text("\n\n"), text("END")], false, Some(10));
    let run = run(&p, &words(&["a\n", "b", "EN", "Dx"]));
    assert_eq!(run.deltas, ["a", "\nb", "", ""]);
    assert_eq!(run.finish, stopped_by_text("END"));

    let run = self::run(&p, &words(&["a\n", "b E", "Nd", "!"]));
    assert_eq!(run.deltas, ["a", "\nb ", "ENd", "!"]);
    assert_eq!(run.finish, None);
}

#[test]
fn stop_token_id_drops_its_text_unless_asked() {
    let tokens = [(100, "hi"), (13, "\n"), (101, "more")];
    let stop = [TokenText::Token(13)];
    let without = run(&params(&stop, false, None), &tokens);
    assert_eq!(without.text(), "hi");
    assert_eq!(without.finish, stopped_by_token(13));
    let with = run(&params(&stop, true, None), &tokens);
    assert_eq!(with.text(), "hi\n");
    assert_eq!(with.finish, stopped_by_token(13));
}

#[test]
fn stop_token_id_flushes_text_held_for_a_stop_string() {
    let p = params(&[text("\n\n"), TokenText::Token(13)], false, None);
    let run = run(&p, &[(100, "hi\n"), (13, "\n")]);
    assert_eq!(run.deltas, ["hi", "\n"]);
    assert_eq!(run.finish, stopped_by_token(13));
}

#[test]
fn eos_stops_without_its_text_and_flushes_held_text() {
    for include in [false, true] {
        let p = params(&[text("\n\n")], include, None);
        let run = run(&p, &[(100, "hi\n"), (EOS, "</s>")]);
        assert_eq!(run.text(), "hi\n", "include_stop_str_in_output={include}");
        assert_eq!(run.finish, stopped_by_token(EOS));
    }
}

#[test]
fn eos_is_checked_before_stop_ids_and_strings() {
    let p = params(&[text("</s>"), TokenText::Token(EOS)], true, None);
    let run = run(&p, &[(100, "a"), (EOS, "</s>")]);
    assert_eq!(run.text(), "a");
    assert_eq!(run.finish, stopped_by_token(EOS));
}

#[test]
fn max_tokens_ends_with_length_and_flushes_held_text() {
    let p = params(&[text("\n\n")], false, Some(2));
    let run = run(&p, &words(&["a", "b\n", "\n"]));
    assert_eq!(run.deltas, ["a", "b\n"]);
    assert_eq!(run.finish, length());
}

#[test]
fn a_stop_string_in_the_last_allowed_token_wins_over_length() {
    let p = params(&[text("\n\n")], false, Some(2));
    let run = run(&p, &words(&["a\n", "\nb"]));
    assert_eq!(run.text(), "a");
    assert_eq!(run.finish, stopped_by_text("\n\n"));
}

#[test]
fn flush_hands_over_held_text_once() {
    let p = params(&[text("\n\n")], false, None);
    let mut matcher = StopMatcher::new(&p, &[EOS]);
    assert_eq!(matcher.step(100, "a\n", 1).emit, "a");
    assert_eq!(matcher.flush(), "\n");
    assert_eq!(matcher.flush(), "");
}

#[test]
fn steps_after_the_end_emit_nothing_and_repeat_the_end() {
    let p = params(&[text("\n\n")], false, Some(1));
    let mut matcher = StopMatcher::new(&p, &[EOS]);
    assert_eq!(matcher.step(100, "a", 1).finished, length());
    let again = matcher.step(101, "b\n\n", 2);
    assert_eq!(again.emit, "");
    assert_eq!(again.finished, length());
    let eos = matcher.step(EOS, "", 3);
    assert_eq!(eos.emit, "");
    assert_eq!(eos.finished, length());
}

#[test]
fn multi_byte_text_is_held_and_cut_on_char_boundaries() {
    let p = params(&[text("€€")], false, None);
    let run = run(&p, &words(&["é€", "x€", "€y"]));
    assert_eq!(run.deltas, ["é", "€x", ""]);
    assert_eq!(run.finish, stopped_by_text("€€"));
}

#[test]
fn without_stop_conditions_everything_is_emitted_at_once() {
    let run = run(&SamplingParams::default(), &words(&["a", "\n", "b"]));
    assert_eq!(run.deltas, ["a", "\n", "b"]);
    assert_eq!(run.finish, None);
}

#[test]
fn empty_stop_strings_from_unvalidated_params_are_ignored() {
    let p = params(&[text(""), text("!")], false, None);
    let run = run(&p, &words(&["a", "b!"]));
    assert_eq!(run.text(), "ab");
    assert_eq!(run.finish, stopped_by_text("!"));
}

proptest! {
    /// Against the plain definition: the text up to the first occurrence of the stop string,
    /// wherever the token boundaries fall, and never more than that on screen.
    #[test]
    fn matches_the_first_occurrence_however_the_text_is_split(
        full in "[ab\n]{0,40}",
        stop in "[ab\n]{1,4}",
        cuts in proptest::collection::vec(0usize..40, 0..12),
        include in any::<bool>(),
    ) {
        let mut cuts: Vec<usize> = cuts.into_iter().filter(|&c| c <= full.len()).collect();
        cuts.extend([0, full.len()]);
        cuts.sort_unstable();
        cuts.dedup();
        let pieces: Vec<&str> = cuts.windows(2).map(|w| &full[w[0]..w[1]]).collect();
        let tokens = words(&pieces);
        let max_tokens = u32::try_from(tokens.len()).unwrap_or(u32::MAX).max(1);
        let p = params(&[text(&stop)], include, Some(max_tokens));
        let run = run(&p, &tokens);
        let expected = match full.find(&stop) {
            Some(start) => {
                prop_assert_eq!(&run.finish, &stopped_by_text(&stop));
                &full[..if include { start + stop.len() } else { start }]
            }
            None => {
                if !tokens.is_empty() {
                    prop_assert_eq!(&run.finish, &length());
                }
                full.as_str()
            }
        };
        prop_assert_eq!(run.text(), expected);
        assert_never_shown_beyond(&run, expected);
    }
}
